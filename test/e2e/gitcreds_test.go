package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// TestGitCredentialsForPlugins: a plugin whose catalog entry consents
// (gitCredentials: true) clones a second, private HTTPS repository with the
// credentials the Application's repository carries, through Argo CD's own
// repo-server: its askpass server hands them out by nonce on the socket the
// injector shared with that sidecar, and git in the plugin asks the plugin
// server, which stands in for Argo CD's askpass binary. A plugin that does
// not ask gets nothing, and one whose ConfigMap plugin.yaml asks without the
// entry's consent is given no path to the socket.
func TestGitCredentialsForPlugins(t *testing.T) {
	user, password := "alice", randomHex(t)
	private := privateGitServer(t, user, password)
	// provideGitCreds arrived in Argo CD v2.14: the newest release.
	rel, err := harness.NewestArgoRelease()
	if err != nil {
		t.Fatal(err)
	}
	rels := []harness.ArgoRelease{rel}
	startInjector(t, gitCredsCatalog(t, private))
	ns := newNamespace(t, "gitcreds", enabledNS)
	waitActive(t, ns)
	argoConfig(t, ns, "gitcreds-redis")
	// The configMap config, which the catalog cannot read: it asks for
	// credentials without the entry's consent.
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "git-nocreds"},
		"data": map[string]any{keys.PluginConfigFile: gitPluginConfig("git-nocreds", true)}}
	if err := env.cp.Client().Apply("/api/v1/namespaces/"+ns+"/configmaps", "git-nocreds", cm); err != nil {
		t.Fatal(err)
	}
	tree := t.TempDir()
	if err := os.MkdirAll(filepath.Join(tree, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, "app", "README"), []byte("the private manifests are elsewhere\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	repoURL, commit, err := harness.GitRepo(filepath.Join(t.TempDir(), "git"), tree)
	if err != nil {
		t.Fatal(err)
	}
	s := &libraryStack{ns: ns, repoURL: repoURL, commit: commit, rels: rels}
	rs, stored := s.bootRepoServer(t, rel, "git-private, git-nocreds, git-plain", "gc0")
	for _, c := range stored.Spec.InitContainers {
		mounts := false
		for _, m := range c.VolumeMounts {
			mounts = mounts || m.Name == keys.AskPassVolume
		}
		if want := c.Name == keys.SidecarName("git-private"); mounts != want {
			t.Errorf("container %s mounts the askpass volume: %v, want %v", c.Name, mounts, want)
		}
	}

	creds := &argoRepo{Repo: s.repoURL, Username: user, Password: password, Insecure: true}
	resp, err := s.generateWith(rs, creds, "private-app", "app", &argoPlugin{Name: "git-private"})
	if err != nil {
		t.Fatalf("the consenting plugin could not render from the private repository: %v", err)
	}
	objs := objectsByName(t, resp.Manifests)
	if _, ok := objs["ConfigMap/from-the-private-repo"]; !ok {
		t.Fatalf("manifests %v lack the private repository's ConfigMap", resp.Manifests)
	}
	data := map[string]string{}
	raw, _ := objs["ConfigMap/askpass"]["data"].(map[string]any)
	for k, v := range raw {
		data[k], _ = v.(string)
	}
	program := askPassProgram(t, data, rs)
	t.Logf("the consenting plugin cloned %s with the repository Secret's credentials, git asking %s: %d manifests", private, program, len(resp.Manifests))

	// A plugin that does not ask (no provideGitCreds, no consent) gets
	// nothing from the repo-server, and git in it cannot clone.
	_, err = s.generateWith(rs, creds, "plain-app", "app", &argoPlugin{Name: "git-plain"})
	if err == nil {
		t.Fatal("a plugin without provideGitCreds cloned the private repository")
	}
	if !strings.Contains(err.Error(), "could not read Username") {
		t.Errorf("git in the plugin did not fail for want of a user name: %v", err)
	}
	if strings.Contains(err.Error(), password) {
		t.Error("the password is in Argo CD's error")
	}
	t.Logf("as expected, a plugin that does not ask gets no credentials: %.300s", err)
	// git-nocreds asks (its ConfigMap plugin.yaml, which the catalog cannot
	// read) without the entry's consent: its sidecar has no path to the
	// socket, checked above on the stored pod. Booted pods share this
	// machine's one filesystem, so the path the repo-server announces would
	// resolve here for any process: the kernel's mount isolation, which
	// makes it fail in a real pod, is not what this boot can show.

	// Without credentials on the Application's repository, the consenting
	// plugin gets none either.
	if _, err := s.generateWith(rs, &argoRepo{Repo: s.repoURL}, "anon-app", "app", &argoPlugin{Name: "git-private"}); err == nil {
		t.Error("the private repository was cloned without credentials")
	}
}

// askPassProgram checks what the plugin's command saw (data of the askpass
// ConfigMap it printed): GIT_ASKPASS=argocd,
// as Argo CD sets it, found on PATH as a link to the plugin server (the copy
// in var-files that the sidecar runs, /var/run/argocd/cmp-server in a pod),
// not an argocd binary the image may hold; it returns the link.
func askPassProgram(t *testing.T, data map[string]string, rs *harness.RepoServer) string {
	t.Helper()
	program, found := data["program"], data["found"]
	if program != "argocd" {
		t.Errorf("the plugin saw GIT_ASKPASS=%q, want argocd as Argo CD sets it", program)
	}
	target, err := os.Readlink(found)
	if want := filepath.Join(rs.Pod.Volumes[keys.VarFilesVolume], "cmp-server"); err != nil || target != want {
		t.Errorf("argocd on the plugin's PATH is %q, a link to %q (%v), want a link to the plugin server %s", found, target, err, want)
	}
	return found
}

// gitPluginConfig is a plugin.yaml that clones $PRIVATE_REPO and prints its
// manifests, then a ConfigMap naming git's askpass program, asking Argo CD
// for git credentials when ask is set.
func gitPluginConfig(name string, ask bool) string {
	script := `dir="$TMPDIR/private-$ARGOCD_APP_NAME"
git clone -q "$PRIVATE_REPO" "$dir"
cat "$dir"/*.yaml
echo ---
printf '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "askpass"}, "data": {"program": "%s", "found": "%s"}}\n' "$GIT_ASKPASS" "$(command -v "$GIT_ASKPASS" || true)"`
	spec := map[string]any{"generate": map[string]any{"command": []string{"sh", "-ec", script}}}
	if ask {
		spec["provideGitCreds"] = true
	}
	b, err := yaml.Marshal(map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "ConfigManagementPlugin",
		"metadata": map[string]any{"name": name}, "spec": spec})
	if err != nil {
		panic(err) // plain maps always marshal
	}
	return string(b)
}

func gitCredsCatalog(t *testing.T, private string) []byte {
	t.Helper()
	cat := map[string]any{}
	if err := yaml.Unmarshal(catalogFor(t, true, map[string][]string{"*": {"helm", "git-private", "git-nocreds", "git-plain"}}), &cat); err != nil {
		t.Fatal(err)
	}
	inline := map[string]any{}
	if err := yaml.Unmarshal([]byte(gitPluginConfig("git-private", true)), &inline); err != nil {
		t.Fatal(err)
	}
	envs := []any{map[string]any{"name": "PRIVATE_REPO", "value": private}}
	plugins := cat["plugins"].(map[string]any)
	plugins["git-private"] = map[string]any{"image": "alpine/git:2.47.2", "gitCredentials": true, "env": envs, "config": map[string]any{"inline": inline}}
	plugins["git-nocreds"] = map[string]any{"image": "alpine/git:2.47.2", "env": envs, "config": map[string]any{"configMap": map[string]any{"name": "git-nocreds"}}}
	plain := map[string]any{}
	if err := yaml.Unmarshal([]byte(gitPluginConfig("git-plain", false)), &plain); err != nil {
		t.Fatal(err)
	}
	// git-plain trusts any certificate itself, so what it lacks is only the
	// credentials (the repo-server's insecure flag travels with them).
	plainEnv := append([]any{map[string]any{"name": "GIT_SSL_NO_VERIFY", "value": "true"}}, envs...)
	plugins["git-plain"] = map[string]any{"image": "alpine/git:2.47.2", "env": plainEnv, "config": map[string]any{"inline": plain}}
	b, err := yaml.Marshal(cat)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// privateGitServer serves a repository holding one ConfigMap over HTTPS
// (git's smart HTTP protocol, git http-backend behind Go's CGI handler) to
// user with password only, and returns its URL.
func privateGitServer(t *testing.T, user, password string) string {
	t.Helper()
	root := t.TempDir()
	work := filepath.Join(t.TempDir(), "work")
	manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-the-private-repo}\ndata: {secret: \"no\"}\n"
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "cm.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	gitEnv := append(os.Environ(), "GIT_AUTHOR_NAME=e2e", "GIT_AUTHOR_EMAIL=e2e@example.com",
		"GIT_COMMITTER_NAME=e2e", "GIT_COMMITTER_EMAIL=e2e@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
	for _, args := range [][]string{
		{"-C", work, "init", "-q", "-b", "main"}, {"-C", work, "add", "."}, {"-C", work, "commit", "-q", "-m", "private"},
		{"clone", "-q", "--bare", work, filepath.Join(root, "private.git")},
	} {
		cmd := exec.Command("git", args...)
		cmd.Env = gitEnv
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatal(err)
	}
	backend := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="private"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/private.git"
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
