package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// The helmfile plugin (deploy/plugins/helmfile) against a real Vault: the
// example catalog's entry injected by the webhook into a repo-server pod
// shaped like Argo CD's, the pod booted with each pinned release. The
// sidecar's projected token is issued by the real kube-apiserver's
// TokenRequest for the pod's ServiceAccount and the audience vault (as the
// kubelet asks for it); vals, inside helmfile, logs in to Vault's Kubernetes
// auth with it, and Vault checks it with that apiserver's TokenReview. The
// rendered Secret carries the value only Vault holds; a role that does not
// match the token is refused by Vault with an error that says so and holds no
// value. Two tenants (issue 26): two catalog entries, each limited to one
// Argo CD project, each with its own Vault role and token audience, read only
// their own secret.

// The Vault roles: the example entry's (vault-settings names it) and the tenants'.
const (
	hfRole    = "argocd-repo-server"
	hfTenantA = "team-a"
	hfTenantB = "team-b"
)

// hfPlanted is a fresh random value: nothing secret is committed, and the
// value found anywhere but in a rendered Secret is a leak.
func hfPlanted(t *testing.T, what string) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return what + "-" + hex.EncodeToString(b)
}

// hfVault starts a Vault dev server in dir, stopped when the test ends, with
// a fresh value at secret/app and at each tenant's secret/<team>, by path.
func hfVault(t *testing.T, dir string) (*harness.Vault, map[string]string) {
	t.Helper()
	vault, err := harness.StartVault(dir, env.logFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vault.Stop)
	values := map[string]string{"app": hfPlanted(t, "app"), hfTenantA: hfPlanted(t, hfTenantA), hfTenantB: hfPlanted(t, hfTenantB)}
	for path, v := range values {
		if err := vault.PutSecret(path, map[string]string{"password": v}); err != nil {
			t.Fatal(err)
		}
	}
	return vault, values
}

// helmfileTenant is the example helmfile entry made a tenant's: its own
// plugin name, Vault role and token audience, and only its project.
func helmfileTenant(t *testing.T, base map[string]any, team string) map[string]any {
	t.Helper()
	b, err := yaml.Marshal(base)
	if err != nil {
		t.Fatal(err)
	}
	var e map[string]any
	if err := yaml.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	inline := e["config"].(map[string]any)["inline"].(map[string]any)
	inline["metadata"] = map[string]any{"name": "helmfile-" + team}
	// Named only: with discovery, Argo CD would pick the first of three
	// plugins matching a helmfile (sockets in name order) for an Application
	// that names none.
	delete(inline["spec"].(map[string]any), "discover")
	// The literal role wins over vault-settings' (env over envFrom).
	e["env"] = append(e["env"].([]any), map[string]any{"name": "VAULT_ROLE_ID", "value": team})
	// Its own audience: a tenant's token cannot log in to another tenant's
	// role, even if its repository names that role (?role_id= in a ref).
	src := e["volumes"].([]any)[0].(map[string]any)["projected"].(map[string]any)["sources"].([]any)[0].(map[string]any)
	src["serviceAccountToken"].(map[string]any)["audience"] = "vault-" + team
	e["allowedProjects"] = []string{team}
	return e
}

// helmfileCatalog is the example catalog with two tenant copies of its
// helmfile entry, everything enabled everywhere.
func helmfileCatalog(t *testing.T) []byte {
	t.Helper()
	var cat map[string]any
	if err := yaml.Unmarshal(catalogFor(t, true, map[string][]string{"*": {"helm", "helmfile", "helmfile-" + hfTenantA, "helmfile-" + hfTenantB}}), &cat); err != nil {
		t.Fatal(err)
	}
	plugins := cat["plugins"].(map[string]any)
	base, ok := plugins["helmfile"].(map[string]any)
	if !ok {
		t.Fatal("the example catalog has no helmfile entry")
	}
	for _, team := range []string{hfTenantA, hfTenantB} {
		plugins["helmfile-"+team] = helmfileTenant(t, base, team)
	}
	b, err := yaml.Marshal(cat)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestHelmfileVault(t *testing.T) {
	harness.RequireVault(t, filepath.Join(harness.MustRepoRoot(t), "bin"))
	start := time.Now()
	rels, err := harness.ArgoReleases()
	if err != nil {
		t.Fatal(err)
	}
	vault, values := hfVault(t, filepath.Join(env.root, "vault"))
	s := vaultStack(t, vault, helmfileCatalog(t), "helmfile", "vault-settings", map[string]any{"VAULT_ADDR": vault.Addr, "VAULT_ROLE_ID": hfRole})
	s.rels = rels
	ns, commit := s.ns, s.commit

	plugins := "helmfile, helmfile-" + hfTenantA + ", helmfile-" + hfTenantB
	for i, rel := range rels {
		t.Run("Argo CD "+rel.Version, func(t *testing.T) {
			rs, stored := s.bootRepoServer(t, rel, plugins, "hf"+strconv.Itoa(i))
			account := stored.Spec.ServiceAccountName
			// The roles bind the pod's ServiceAccount (default: the
			// chain's template names none) and namespace, each to its
			// audience and its own secret.
			exampleRole := func() error { return vault.KubernetesRole(hfRole, ns, account, harness.VaultAudience, "app") }
			if err := exampleRole(); err != nil {
				t.Fatal(err)
			}
			for _, team := range []string{hfTenantA, hfTenantB} {
				if err := vault.KubernetesRole(team, ns, account, "vault-"+team, team); err != nil {
					t.Fatal(err)
				}
			}
			t.Run("the rendered Secret carries Vault's value", func(t *testing.T) {
				for _, plugin := range []*argoPlugin{{Name: "helmfile"}, {}} {
					resp, err := s.generate(rs, "vault-app", "helmfile", plugin)
					if err != nil {
						t.Fatalf("plugin %+v: %v", plugin, err)
					}
					if got := hfPassword(t, resp, "app-db"); got != values["app"] || resp.SourceType != "Plugin" || resp.Revision != commit {
						t.Errorf("plugin %+v (empty: discovery by helmfile.yaml*): %s at %s, password %q; want Plugin, %s and Vault's value",
							plugin, resp.SourceType, resp.Revision, got, commit)
					}
				}
			})
			t.Run("a helmfile template reading the token file is refused", func(t *testing.T) {
				// HELMFILE_DISABLE_INSECURE_FEATURES of the catalog entry.
				_, err := s.generate(rs, "read-token", "helmfile-tenants/read-token", &argoPlugin{Name: "helmfile"})
				hfCheckRefusal(t, err, values, "insecure function calls are disabled")
			})
			t.Run("Vault refuses a role of another ServiceAccount", func(t *testing.T) {
				hfRefused(t, s, rs, values, func() error {
					return vault.KubernetesRole(hfRole, ns, "someone-else", harness.VaultAudience, "app")
				}, exampleRole, "service account name not authorized")
			})
			t.Run("Vault refuses a role of another audience", func(t *testing.T) {
				hfRefused(t, s, rs, values, func() error {
					return vault.KubernetesRole(hfRole, ns, account, "not-"+harness.VaultAudience, "app")
				}, exampleRole, "invalid audience")
			})
			if !strings.HasPrefix(rel.Version, "v2.") {
				// Argo CD sends the project since v3.0 (TestTenantsThroughArgoCD
				// covers v2's refusal of a project-limited plugin).
				t.Run("two tenants, each reads only its own secret", func(t *testing.T) { hfTenants(t, s, rs, values) })
			}
			t.Run("no value in any process's log", func(t *testing.T) {
				all, err := os.ReadFile(env.logFile.Name())
				if err != nil {
					t.Fatal(err)
				}
				for name, v := range values {
					if strings.Contains(string(all), v) {
						t.Errorf("the value of secret/%s is in the processes' log", name)
					}
				}
			})
		})
	}
	t.Logf("TestHelmfileVault took %s", time.Since(start).Round(time.Millisecond))
}

// vaultStack is what a Vault plugin's test shares: the injector serving
// catalog, a fresh namespace (prefix) with Argo CD's objects and Redis, Vault's
// Kubernetes auth reviewing with the suite's apiserver, the install's settings
// ConfigMap (settingsName with data, what an admin creates once), and the
// library's test repository.
func vaultStack(t *testing.T, vault *harness.Vault, catalog []byte, prefix, settingsName string, data map[string]any) *libraryStack {
	t.Helper()
	c := env.cp.Client()
	startInjector(t, catalog)
	ns := newNamespace(t, prefix, enabledNS)
	waitActive(t, ns)
	argoConfig(t, ns, prefix+"-redis")
	if err := vault.EnableKubernetesAuth(c, ns); err != nil {
		t.Fatal(err)
	}
	settings := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": settingsName}, "data": data}
	if err := c.Apply("/api/v1/namespaces/"+ns+"/configmaps", settingsName, settings); err != nil {
		t.Fatal(err)
	}
	repoURL, commit, err := harness.GitRepo(filepath.Join(t.TempDir(), "git"), libraryRepo)
	if err != nil {
		t.Fatal(err)
	}
	return &libraryStack{ns: ns, repoURL: repoURL, commit: commit}
}

// hfPassword is the password of Secret name in a response.
func hfPassword(t *testing.T, resp manifestResponse, name string) string {
	t.Helper()
	sec, ok := objectsByName(t, resp.Manifests)["Secret/"+name]
	if !ok || len(resp.Manifests) != 1 {
		t.Fatalf("manifests %q, want Secret/%s alone", resp.Manifests, name)
	}
	data, _ := sec["stringData"].(map[string]any)
	got, _ := data["password"].(string)
	return got
}

// hfRefused sets the example role with change, renders the helmfile app,
// expects Vault's refusal of the login (its reason, want, in Argo CD's
// error, no value in it), and sets the role back with restore.
func hfRefused(t *testing.T, s *libraryStack, rs *harness.RepoServer, values map[string]string, change, restore func() error, want string) {
	t.Helper()
	if err := change(); err != nil {
		t.Fatal(err)
	}
	_, err := s.generate(rs, "vault-app", "helmfile", &argoPlugin{Name: "helmfile"})
	if rerr := restore(); rerr != nil {
		t.Fatal(rerr)
	}
	hfCheckRefusal(t, err, values, "auth/kubernetes/login", want)
}

// hfCheckRefusal: err is Argo CD's error around Vault's refusal, naming
// where and why (each of want), and no value is in it.
func hfCheckRefusal(t *testing.T, err error, values map[string]string, want ...string) {
	t.Helper()
	var rpcErr *harness.RPCError
	if !errors.As(err, &rpcErr) {
		t.Fatalf("rendered: %v", err)
	}
	for _, w := range want {
		if !strings.Contains(rpcErr.Message, w) {
			t.Errorf("Argo CD's error does not say %q:\n%s", w, rpcErr.Message)
		}
	}
	for name, v := range values {
		if strings.Contains(rpcErr.Message, v) {
			t.Errorf("the value of secret/%s is in the error", name)
		}
	}
	t.Logf("as expected, Argo CD says: %s", rpcErr.Message)
}

// hfTenants: team-a's and team-b's Applications, each in its project, through
// each tenant's plugin.
func hfTenants(t *testing.T, s *libraryStack, rs *harness.RepoServer, values map[string]string) {
	generate := func(plugin, project, path string) (manifestResponse, error) {
		req := manifestRequest{
			Repo: &argoRepo{Repo: s.repoURL}, Revision: "HEAD", NoCache: true,
			AppName: "app-" + project, Namespace: "demo",
			ApplicationSource: &argoSource{RepoURL: s.repoURL, Path: path, TargetRevision: "HEAD", Plugin: &argoPlugin{Name: plugin}},
			KubeVersion:       kubeVersion(), APIVersions: []string{"v1"},
			ProjectName: project, ProjectSourceRepos: []string{"*"},
		}
		var resp manifestResponse
		err := rs.Call("generate", req, &resp)
		return resp, err
	}
	for _, team := range []string{hfTenantA, hfTenantB} {
		t.Run(team+" renders its own secret", func(t *testing.T) {
			resp, err := generate("helmfile-"+team, team, "helmfile-tenants/"+team)
			if err != nil {
				t.Fatal(err)
			}
			if got := hfPassword(t, resp, team+"-db"); got != values[team] {
				t.Errorf("password %q, want the value of secret/%s", got, team)
			}
		})
	}
	t.Run("team-a's repository naming team-b's secret: Vault refuses", func(t *testing.T) {
		_, err := generate("helmfile-"+hfTenantA, hfTenantA, "helmfile-tenants/"+hfTenantB)
		hfCheckRefusal(t, err, values, "secret/data/"+hfTenantB, "permission denied")
	})
	t.Run("team-a's repository naming team-b's role: Vault refuses the token's audience", func(t *testing.T) {
		_, err := generate("helmfile-"+hfTenantA, hfTenantA, "helmfile-tenants/steal-role")
		hfCheckRefusal(t, err, values, "auth/kubernetes/login", "invalid audience")
	})
	t.Run("team-b's Application through team-a's plugin: the plugin refuses", func(t *testing.T) {
		_, err := generate("helmfile-"+hfTenantA, hfTenantB, "helmfile-tenants/"+hfTenantB)
		hfCheckRefusal(t, err, values, fmt.Sprintf(`plugin %q refuses project %q`, "helmfile-"+hfTenantA, hfTenantB))
	})
}
