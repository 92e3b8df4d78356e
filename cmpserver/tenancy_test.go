package cmpserver

import (
	"crypto/rand"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
)

// tenantPlugin is limited to project team-a (and platform-*) and to the
// repositories of github.com/org.
const tenantPlugin = `apiVersion: argoproj.io/v1alpha1
kind: ConfigManagementPlugin
metadata:
  name: vault
spec:
  allowedProjects: [team-a, "platform-*"]
  allowedSourceRepos: ["https://github.com/org/*"]
  discover:
    fileName: app.txt
  parameters:
    static: [{name: path}]
  generate:
    command: [sh, -c, "echo '{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"rendered\"}}'"]
`

func tenantEnv(project, repo string) []string {
	env := []string{"ARGOCD_APP_NAME=app", "ARGOCD_ENV_TOKEN=s3cret-token"}
	if project != "" {
		env = append(env, "ARGOCD_APP_PROJECT_NAME="+project)
	}
	if repo != "" {
		env = append(env, "ARGOCD_APP_SOURCE_REPO_URL="+repo)
	}
	return env
}

// A request the rules refuse is answered PermissionDenied with a message
// naming the plugin, the project and the rule, before the server writes
// anything: the work dir is replaced by a file, so that creating a request
// dir or spooling the tarball fails (as an allowed request shows). The
// repository is larger than the stream's flow-control window, so a server
// that stopped reading would cut the client's stream (EOF) instead of
// answering.
func TestTenancyRefusesBeforeWriting(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.InfoLevel)
	ts := startServer(t, tenantPlugin, func(o *Options) { o.Logger = zap.New(core) })
	big := make([]byte, 4<<20)
	_, _ = rand.Read(big)
	root := writeTree(t, map[string]string{"app.txt": "x", "big.bin": string(big)})
	work := ts.srv.opts.WorkDir
	if err := os.RemoveAll(work); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(work, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	good := "https://github.com/org/apps.git"
	for _, tc := range []struct {
		name          string
		project, repo string
		want          string
		reason        string
	}{
		{"other project", "team-b", good, `plugin "vault" refuses project "team-b": it is not in allowedProjects [team-a, platform-*]`, "project_not_allowed"},
		{"no project", "", good, `plugin "vault" refuses this request: it names no Argo CD project, and the plugin is limited to allowedProjects [team-a, platform-*]; Argo CD's repo-server sends the project only with GenerateManifest, and only since v3.0`, "project_missing"},
		{"other repository", "team-a", "https://bob:hunter2@gitlab.com/org/apps", `plugin "vault" refuses repository "https://bob:xxxxx@gitlab.com/org/apps" of project "team-a": it matches none of allowedSourceRepos [https://github.com/org/*]`, "repo_not_allowed"},
	} {
		_, err := ts.dial(t).Generate(ctxTimeout(t, 60*time.Second), client.Request{RepoRoot: root, Env: tenantEnv(tc.project, tc.repo)})
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Generate error %v, want PermissionDenied with %q", tc.name, err, tc.want)
		}
		if v := metricValue(t, ts.srv.metrics, "cmp_server_tenancy_refusals_total", "rpc=GenerateManifest", "reason="+tc.reason); v != 1 {
			t.Errorf("%s: refusals{%s} = %v", tc.name, tc.reason, v)
		}
	}
	_, err := ts.dial(t).Parameters(ctxTimeout(t, 60*time.Second), client.Request{RepoRoot: root, Env: tenantEnv("", "https://gitlab.com/x/y")})
	wantErr(t, err, `plugin "vault" refuses repository "https://gitlab.com/x/y" of project (none): it matches none of allowedSourceRepos`)
	if fi, err := os.Stat(work); err != nil || fi.IsDir() {
		t.Fatalf("the work dir changed: %v, %v", fi, err)
	}
	// A request from an allowed project is let through, and fails at the
	// first write: the refusals above wrote nothing. (Its repository is
	// small: a server that stops reading a large one cuts the client's
	// stream, which is why a refusal reads the stream to its end.)
	small := writeTree(t, map[string]string{"app.txt": "x"})
	_, err = ts.dial(t).Generate(ctxTimeout(t, 60*time.Second), client.Request{RepoRoot: small, Env: tenantEnv("team-a", good)})
	wantErr(t, err, "error creating request dir")

	refusals := logs.FilterMessage("request refused: the plugin is limited to some projects or repositories")
	if refusals.Len() != 4 {
		t.Errorf("%d refusals logged, want 4", refusals.Len())
	}
	for _, e := range logs.All() {
		for k, v := range e.ContextMap() {
			if s, _ := v.(string); strings.Contains(s, "hunter2") || strings.Contains(s, "s3cret") {
				t.Errorf("log %q carries a secret in %s: %q", e.Message, k, s)
			}
		}
	}
}

// Allowed requests are served; discovery is never refused (a refused match
// would send an untyped Application to plain YAML silently), and the
// parameters announcement, which carries no project, is judged by its
// repository only.
func TestTenancyAllows(t *testing.T) {
	t.Parallel()
	ts := startServer(t, tenantPlugin, nil)
	root := writeTree(t, map[string]string{"app.txt": "x"})
	ctx := ctxTimeout(t, 60*time.Second)
	good := "https://github.com/org/apps"
	for _, project := range []string{"team-a", "platform-x"} {
		got, err := ts.dial(t).Generate(ctx, client.Request{RepoRoot: root, Env: tenantEnv(project, good)})
		if err != nil || len(got) != 1 {
			t.Errorf("project %s: Generate = %q, %v", project, got, err)
		}
	}
	m, err := ts.dial(t).Match(ctx, client.Request{RepoRoot: root, Env: tenantEnv("team-b", "https://gitlab.com/x")})
	if err != nil || !m.Supported {
		t.Errorf("Match from a refused project = %+v, %v; want it matched", m, err)
	}
	ann, err := ts.dial(t).Parameters(ctx, client.Request{RepoRoot: root, Env: tenantEnv("", good)})
	if err != nil || len(ann) != 1 {
		t.Errorf("Parameters without a project = %+v, %v", ann, err)
	}
}

// A change of the rules in plugin.yaml (the injector's annotation, projected
// by the kubelet) applies to the next request, without a restart.
func TestTenancyRulesReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := strings.Replace(tenantPlugin, "[team-a, ", "[team-c, ", 1)
	if err := servingtest.WriteProjected(dir, map[string][]byte{"plugin.yaml": []byte(first)}); err != nil {
		t.Fatal(err)
	}
	ts, _ := startReloading(t, dir, first)
	root := writeTree(t, map[string]string{"app.txt": "x"})
	req := client.Request{RepoRoot: root, Env: tenantEnv("team-a", "https://github.com/org/apps")}
	_, err := ts.dial(t).Generate(ctxTimeout(t, 30*time.Second), req)
	wantErr(t, err, `refuses project "team-a": it is not in allowedProjects [team-c, platform-*]`)
	if err := servingtest.WriteProjected(dir, map[string][]byte{"plugin.yaml": []byte(tenantPlugin)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reload", func() bool { return ts.srv.ConfigHash() == sum(tenantPlugin) })
	if _, err := ts.dial(t).Generate(ctxTimeout(t, 30*time.Second), req); err != nil {
		t.Errorf("after the reload: %v", err)
	}
}
