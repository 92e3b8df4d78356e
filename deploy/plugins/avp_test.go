package plugins

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/params"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
	"github.com/cmp-injector/cmp-injector/test/sopstest"
)

// TestArgoCDVaultPlugin runs the argocd-vault-plugin plugin.yaml with the
// pinned argocd-vault-plugin, helm and kustomize of bin/ against a Vault dev
// server (bin/vault) holding values planted at run time: AVP's token auth here,
// a token that may read secret/avp only (TestArgoCDVaultPluginThroughArgoCD in
// test/e2e runs its Kubernetes auth through Argo CD's repo-server). One plugin
// serves plain manifests, a Helm chart and a kustomization.
func TestArgoCDVaultPlugin(t *testing.T) {
	harness.RequireVault(t, toolsBin)
	if _, err := os.Stat(filepath.Join(toolsBin, "argocd-vault-plugin")); err != nil {
		t.Fatalf("argocd-vault-plugin not found in %s: run hack/tools.sh argocd-vault-plugin", toolsBin)
	}
	vault, err := harness.StartVault(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vault.Stop)
	password, username, other := sopstest.Planted(t), sopstest.Planted(t), sopstest.Planted(t)
	if err := vault.PutSecret("avp", map[string]string{"password": password, "username": username}); err != nil {
		t.Fatal(err)
	}
	if err := vault.PutSecret("other", map[string]string{"password": other}); err != nil {
		t.Fatal(err)
	}
	token, err := vault.ReadToken("avp-reader", "avp")
	if err != nil {
		t.Fatal(err)
	}
	// The catalog entry's env, but for the auth: a token instead of k8s.
	env := []string{"VAULT_ADDR=" + vault.Addr, "AVP_TYPE=vault", "AVP_AUTH_TYPE=token", "VAULT_TOKEN=" + token}
	inv := func(app string, ps ...params.AppParameter) invocation {
		return invocation{config: "argocd-vault-plugin", app: filepath.Join("avp", app), env: env, params: ps,
			args: []string{"--repo-root", "testdata", "--app-name", "shop", "--app-namespace", "demo"}}
	}
	noLeak := func(t *testing.T, what, s string) {
		t.Helper()
		for _, v := range []string{password, username, other, token} {
			if strings.Contains(s, v) {
				t.Errorf("%s holds a secret value or the token:\n%s", what, s)
			}
		}
	}
	stringData := func(t *testing.T, objs map[string]map[string]any, name string) map[string]any {
		t.Helper()
		obj, ok := objs[name]
		if !ok {
			t.Fatalf("no %s in %v", name, names(objs))
		}
		d, _ := obj["stringData"].(map[string]any)
		return d
	}

	t.Run("plain manifests: both placeholder forms", func(t *testing.T) {
		objs := generate(t, inv("plain"))
		if d := stringData(t, objs, "Secret/app-db"); d["password"] != password || d["username"] != username {
			t.Errorf("Secret/app-db %v: want the <path:...#key> placeholders replaced", d)
		}
		if d := stringData(t, objs, "Secret/app-api"); d["password"] != password {
			t.Errorf("Secret/app-api %v: want <password> replaced from avp.kubernetes.io/path", d)
		}
		cm, _ := json.Marshal(objs["ConfigMap/app-settings"])
		noLeak(t, "the ConfigMap that asks for nothing", string(cm))
	})
	t.Run("a Helm chart, its parameters applied before AVP", func(t *testing.T) {
		objs := generate(t, inv("helm", params.AppParameter{Name: "release-name", String: str("rel")},
			params.AppParameter{Name: "helm-parameters", Map: map[string]string{"replicas": "3"}}))
		if d := stringData(t, objs, "Secret/rel-db"); d["password"] != password {
			t.Errorf("Secret/rel-db %v: want the chart's placeholder replaced", d)
		}
		if got := field(objs["ConfigMap/rel-settings"], "data", "replicas"); got != "3" {
			t.Errorf("replicas %v: want the helm-parameters value 3", got)
		}
	})
	t.Run("a kustomization", func(t *testing.T) {
		objs := generate(t, inv("kustomize", params.AppParameter{Name: "name-prefix", String: str("p-")}))
		if d := stringData(t, objs, "Secret/p-db"); d["password"] != password {
			t.Errorf("Secret/p-db %v: want the placeholder replaced after kustomize's name prefix", d)
		}
	})
	t.Run("the chart's values are announced", func(t *testing.T) {
		out, stderr, err := run(t, withAction(inv("helm"), "parameters"))
		if err != nil || !strings.Contains(out, "secretPath") {
			t.Errorf("parameters: %v\n%s\n%s", err, out, stderr)
		}
	})
	t.Run("a path the token may not read: Vault's refusal, no value", func(t *testing.T) {
		out, stderr := refusedOutput(t, withAction(inv("denied"), "generate"), "permission denied")
		noLeak(t, "the refusal", out+stderr)
	})
	t.Run("a broken chart: helm's error, not AVP's", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("apiVersion: v2\nname: broken\nversion: 0.1.0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, "templates"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "templates", "x.yaml"), []byte("{{ .Values.nope.deeper }}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		i := inv("plain")
		i.app = dir
		i.args = []string{"--app-name", "x"}
		refusedOutput(t, withAction(i, "generate"), "nil pointer evaluating interface {}.deeper")
	})
}

// TestArgoCDVaultPluginEntry: the example catalog's entry gives AVP a token
// of the audience vault at the path its env names, never the default token
// path, and its settings from a ConfigMap.
func TestArgoCDVaultPluginEntry(t *testing.T) {
	cat, err := catalog.Load("catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e, ok := cat.Plugins["argocd-vault-plugin"]
	if !ok {
		t.Fatal("no argocd-vault-plugin entry")
	}
	env := map[string]string{}
	for _, v := range e.Env {
		env[v.Name] = v.Value
	}
	if len(e.Volumes) != 1 || e.Volumes[0].Projected == nil || len(e.Volumes[0].Projected.Sources) != 1 {
		t.Fatalf("volumes %+v, want one projected token", e.Volumes)
	}
	tok := e.Volumes[0].Projected.Sources[0].ServiceAccountToken
	if tok == nil || tok.Audience != "vault" || filepath.Join(e.Volumes[0].MountPath, tok.Path) != env["AVP_K8S_TOKEN_PATH"] {
		t.Errorf("token %+v at %s, AVP_K8S_TOKEN_PATH %q: want audience vault at that path", tok, e.Volumes[0].MountPath, env["AVP_K8S_TOKEN_PATH"])
	}
	if env["AVP_AUTH_TYPE"] != "k8s" || env["AVP_TYPE"] != "vault" || len(e.EnvFrom) != 1 {
		t.Errorf("env %v envFrom %+v: want AVP's Kubernetes auth with its settings from a ConfigMap", env, e.EnvFrom)
	}
}
