package plugins

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
	"github.com/cmp-injector/cmp-injector/test/sopstest"
)

// TestHelmfile runs the helmfile plugin.yaml with the pinned helmfile and helm
// of bin/ against a Vault dev server (bin/vault, tests only) holding a value
// planted at run time. vals, inside helmfile, authenticates with Vault's token
// auth here, a token that may read secret/app only: there is no apiserver to
// review a Kubernetes token (TestHelmfileVault in test/e2e does that).
func TestHelmfile(t *testing.T) {
	harness.RequireVault(t, toolsBin)
	if _, err := os.Stat(filepath.Join(toolsBin, "helmfile")); err != nil {
		t.Fatalf("helmfile not found in %s: run hack/tools.sh helmfile", toolsBin)
	}
	vault, err := harness.StartVault(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vault.Stop)
	planted, other := sopstest.Planted(t), sopstest.Planted(t)
	if err := vault.PutSecret("app", map[string]string{"password": planted}); err != nil {
		t.Fatal(err)
	}
	if err := vault.PutSecret("other", map[string]string{"password": other}); err != nil {
		t.Fatal(err)
	}
	token, err := vault.ReadToken("app-reader", "app")
	if err != nil {
		t.Fatal(err)
	}
	// The repository is testdata: the tenants' helmfiles use the chart of
	// ../../helmfile, as Argo CD unpacks the whole repository.
	inv := invocation{config: "helmfile", app: "helmfile", args: []string{"--repo-root", "testdata", "--app-namespace", "demo"},
		env: []string{"VAULT_ADDR=" + vault.Addr, "VAULT_TOKEN=" + token, "HELMFILE_DISABLE_INSECURE_FEATURES=true"}}
	noLeak := func(t *testing.T, what, s string) {
		t.Helper()
		for _, v := range []string{planted, other, token} {
			if strings.Contains(s, v) {
				t.Errorf("%s holds a secret value or the token:\n%s", what, s)
			}
		}
	}
	t.Run("the Secret carries Vault's value", func(t *testing.T) {
		out, stderr, err := run(t, withAction(inv, "generate"))
		if err != nil {
			t.Fatalf("generate: %v\n%s", err, stderr)
		}
		objs := generate(t, inv)
		if got := names(objs); len(got) != 1 || got[0] != "Secret/app-db" {
			t.Fatalf("objects %q, want Secret/app-db", got)
		}
		if got := field(objs["Secret/app-db"], "stringData", "password"); got != planted {
			t.Errorf("password %v, want Vault's value", got)
		}
		// The namespace is ARGOCD_APP_NAMESPACE, read by the .gotmpl helmfile.
		if got := field(objs["Secret/app-db"], "metadata", "namespace"); got != "demo" {
			t.Errorf("namespace %v, want demo", got)
		}
		noLeak(t, "helmfile's stderr", stderr)
		if strings.Count(out, planted) != 1 {
			t.Errorf("the value is %d times in the manifests, want once", strings.Count(out, planted))
		}
	})
	t.Run("a secret the token may not read: Vault's refusal, no value", func(t *testing.T) {
		inv := inv
		inv.app = "helmfile-tenants/team-b"
		if err := vault.PutSecret("team-b", map[string]string{"password": other}); err != nil {
			t.Fatal(err)
		}
		_, stderr := refusedOutput(t, withAction(inv, "generate"), "permission denied")
		if !strings.Contains(stderr, "secret/data/team-b") {
			t.Errorf("the error does not name the path:\n%s", stderr)
		}
		noLeak(t, "the error", stderr)
	})
	t.Run("no Vault token: Vault's refusal", func(t *testing.T) {
		inv := inv
		inv.env = []string{"VAULT_ADDR=" + vault.Addr, "HELMFILE_DISABLE_INSECURE_FEATURES=true"}
		// Vault (v1.19.5) answers a request without a token with 403 on the
		// first path vals asks, its mount lookup.
		_, stderr := refusedOutput(t, withAction(inv, "generate"), "permission denied")
		if !strings.Contains(stderr, "sys/internal/ui/mounts/secret/app") || !strings.Contains(stderr, "Code: 403") {
			t.Errorf("the error does not say which request Vault refused:\n%s", stderr)
		}
		noLeak(t, "the error", stderr)
	})
}

// TestHelmfileWithoutVault runs the plugin.yaml with the pinned helmfile and
// helm where no Vault is needed: a copy of the test app whose reference is
// vals' echo provider renders through helmfile and the local chart with
// nothing fetched; a template reading the token file is refused, as the
// catalog entry's HELMFILE_DISABLE_INSECURE_FEATURES has it; discovery.
func TestHelmfileWithoutVault(t *testing.T) {
	if _, err := os.Stat(filepath.Join(toolsBin, "helmfile")); err != nil {
		t.Fatalf("helmfile not found in %s: run hack/tools.sh helmfile", toolsBin)
	}
	env := []string{"HELMFILE_DISABLE_INSECURE_FEATURES=true"}
	t.Run("a vals reference rendered into the Secret", func(t *testing.T) {
		root := t.TempDir()
		app := filepath.Join(root, "helmfile")
		if err := os.CopyFS(app, os.DirFS(filepath.Join("testdata", "helmfile"))); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(app, "helmfile.yaml.gotmpl")
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		echo := strings.Replace(string(b), "ref+vault://secret/app#/password", "ref+echo://from-vals", 1)
		if echo == string(b) {
			t.Fatal("the test app has no ref+vault://secret/app#/password")
		}
		if err := os.WriteFile(file, []byte(echo), 0o644); err != nil {
			t.Fatal(err)
		}
		objs := generate(t, invocation{config: "helmfile", app: app, args: []string{"--repo-root", root, "--app-namespace", "demo"}, env: env})
		sec := objs["Secret/app-db"]
		if len(objs) != 1 || field(sec, "stringData", "password") != "from-vals" || field(sec, "metadata", "namespace") != "demo" {
			t.Errorf("objects %v, want Secret/app-db in demo with the echoed password", objs)
		}
	})
	t.Run("a template reading a file: refused, as the catalog entry sets", func(t *testing.T) {
		refusedOutput(t, invocation{action: "generate", config: "helmfile", app: "helmfile-tenants/read-token",
			args: []string{"--repo-root", "testdata"}, env: env}, "insecure function calls are disabled")
	})
	t.Run("discovery by helmfile.yaml and helmfile.yaml.gotmpl", func(t *testing.T) {
		for app, want := range map[string]string{"helmfile": "true", "helmfile-tenants/team-a": "true", "helmfile/chart": "false", "kustomize": "false"} {
			out, stderr, err := run(t, invocation{action: "match", config: "helmfile", app: app})
			if err != nil || strings.TrimSpace(out) != want {
				t.Errorf("match %s = %q %v, want %s; %s", app, out, err, want, stderr)
			}
		}
	})
}
