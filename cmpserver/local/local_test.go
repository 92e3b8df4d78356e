package local

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/cmp-injector/cmp-injector/cmpserver/command"
	"github.com/cmp-injector/cmp-injector/cmpserver/unpack"
	"github.com/cmp-injector/cmp-injector/cmpserver/unpack/tartest"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
)

const (
	plantedToken = "planted-0f3a9c27e1d84b56-token"
	tokenVar     = "CMP_TEST_VAULT_TOKEN"
	tokenTag     = "[redacted " + tokenVar + "]"
)

// plugin is a plugin.yaml generating with sh -c generate, and more of its spec.
func plugin(t *testing.T, generate string, spec ...string) *pluginconfig.Plugin {
	t.Helper()
	p, _, err := pluginconfig.Parse([]byte("apiVersion: argoproj.io/v1alpha1\nkind: ConfigManagementPlugin\nmetadata: {name: local}\nspec:\n  generate:\n    command: [sh, -c, '" + generate + "']\n" + strings.Join(spec, "")))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A local run (cmp-server run, the playground) redacts as the sidecar does:
// its error and the stderr in its command reports.
func TestLocalRunRedacts(t *testing.T) {
	t.Parallel()
	var reports []command.Report
	_, err := Generate(context.Background(), Request{
		Plugin: plugin(t, `env >&2; exit 3`), RepoRoot: tartest.Tree(t, map[string]string{"app.yaml": "a: b\n"}),
		BaseEnv: append(os.Environ(), tokenVar+"="+plantedToken, keys.EnvSecretEnv+"="+tokenVar),
		Exec:    command.DefaultOptions(), Limits: unpack.DefaultLimits(),
		OnCommand: func(r command.Report) { reports = append(reports, r) },
	})
	if err == nil || strings.Contains(err.Error(), plantedToken) || !strings.Contains(err.Error(), tokenTag) {
		t.Errorf("local run error: %v", err)
	}
	if len(reports) != 1 || strings.Contains(reports[0].Stderr, plantedToken) || !strings.Contains(reports[0].Stderr, tokenTag) {
		t.Errorf("reports %+v", reports)
	}
}

// A local run refuses options a server would refuse, naming every flag.
func TestLocalRunChecksOptions(t *testing.T) {
	t.Parallel()
	exec := command.DefaultOptions()
	exec.Timeout = -1
	limits := unpack.DefaultLimits()
	limits.MaxFiles = -1
	_, err := Generate(context.Background(), Request{Plugin: plugin(t, `true`), RepoRoot: t.TempDir(), Exec: exec, Limits: limits})
	if err == nil || !strings.Contains(err.Error(), "--exec-timeout must not be negative") || !strings.Contains(err.Error(), "--max-files must not be negative") {
		t.Fatalf("got %v, want both flags named", err)
	}
}

// A run generates in the app dir and discovers from it, as a sidecar does.
func TestLocalGenerateAndMatch(t *testing.T) {
	t.Parallel()
	tree := tartest.Tree(t, map[string]string{"app/cm.yaml": "x: y\n"})
	out, err := Generate(context.Background(), Request{
		Plugin:   plugin(t, `printf "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"%s\"}}" "$(basename "$PWD")"`),
		RepoRoot: tree, AppRelPath: "app", Exec: command.DefaultOptions(), Limits: unpack.DefaultLimits(),
	})
	if err != nil || len(out) != 1 || !strings.Contains(out[0], `"name":"app"`) {
		t.Fatalf("generate: %q, %v", out, err)
	}
	p := plugin(t, `true`, "  discover: {fileName: \"*.yaml\"}\n")
	ok, err := Match(context.Background(), Request{Plugin: p, RepoRoot: tree, AppRelPath: "app", Exec: command.DefaultOptions(), Limits: unpack.DefaultLimits()})
	if err != nil || !ok {
		t.Fatalf("match: %v, %v", ok, err)
	}
}
