package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// argocd-vault-plugin (deploy/plugins/argocd-vault-plugin) against a real
// Vault, through Argo CD's repo-server: the example catalog's entry injected
// by the webhook, the pod booted with each pinned release, the sidecar
// running the pinned argocd-vault-plugin of bin/ (the image's, byte for byte).
// AVP logs in with Vault's Kubernetes auth using the sidecar's projected
// token, which the real kube-apiserver issued for the pod's ServiceAccount
// and audience vault and which Vault reviews with that apiserver. One sidecar
// renders plain manifests, a Helm chart and a kustomization; the values only
// Vault holds appear only where a manifest asks for them, and in no process's
// log or any error.

const avpRole = "argocd-repo-server"

func TestArgoCDVaultPluginThroughArgoCD(t *testing.T) {
	harness.RequireVault(t, filepath.Join(harness.MustRepoRoot(t), "bin"))
	start := time.Now()
	rels, err := harness.ArgoReleases()
	if err != nil {
		t.Fatal(err)
	}
	vault, err := harness.StartVault(filepath.Join(env.root, "avp-vault"), env.logFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vault.Stop)
	password, username, other := hfPlanted(t, "avp"), hfPlanted(t, "user"), hfPlanted(t, "other")
	if err := vault.PutSecret("avp", map[string]string{"password": password, "username": username}); err != nil {
		t.Fatal(err)
	}
	if err := vault.PutSecret("other", map[string]string{"password": other}); err != nil {
		t.Fatal(err)
	}

	// What an admin writes once per install (the catalog entry's comment).
	s := vaultStack(t, vault, catalogFor(t, true, map[string][]string{"*": {"helm", "argocd-vault-plugin"}}), "avp", "avp-settings",
		map[string]any{"VAULT_ADDR": vault.Addr, "AVP_K8S_ROLE": avpRole})
	s.rels = rels
	ns, commit := s.ns, s.commit
	plugin := &argoPlugin{Name: "argocd-vault-plugin"}
	secretData := func(t *testing.T, resp manifestResponse, name string) map[string]any {
		t.Helper()
		obj, ok := objectsByName(t, resp.Manifests)["Secret/"+name]
		if !ok {
			t.Fatalf("no Secret/%s in %v", name, resp.Manifests)
		}
		d, _ := obj["stringData"].(map[string]any)
		return d
	}
	noValue := func(t *testing.T, what, text string) {
		t.Helper()
		for _, v := range []string{password, username, other} {
			if strings.Contains(text, v) {
				t.Errorf("%s holds a value of Vault's", what)
			}
		}
	}

	for i, rel := range rels {
		t.Run("Argo CD "+rel.Version, func(t *testing.T) {
			rs, stored := s.bootRepoServer(t, rel, "argocd-vault-plugin", "avp"+strconv.Itoa(i))
			if err := vault.KubernetesRole(avpRole, ns, stored.Spec.ServiceAccountName, harness.VaultAudience, "avp"); err != nil {
				t.Fatal(err)
			}
			t.Run("plain manifests", func(t *testing.T) {
				resp, err := s.generate(rs, "shop", "avp/plain", plugin)
				if err != nil {
					t.Fatal(err)
				}
				if d := secretData(t, resp, "app-db"); d["password"] != password || d["username"] != username {
					t.Errorf("Secret/app-db: want <path:secret/data/avp#...> replaced with Vault's values")
				}
				if d := secretData(t, resp, "app-api"); d["password"] != password {
					t.Errorf("Secret/app-api: want <password> replaced from avp.kubernetes.io/path")
				}
				for _, m := range resp.Manifests {
					if strings.Contains(m, `"kind":"ConfigMap"`) {
						noValue(t, "the ConfigMap that asks for nothing", m)
					}
				}
				if resp.SourceType != "Plugin" || resp.Revision != commit {
					t.Errorf("%s at %s, want Plugin at %s", resp.SourceType, resp.Revision, commit)
				}
			})
			t.Run("a Helm chart with its parameters", func(t *testing.T) {
				resp, err := s.generate(rs, "shop", "avp/helm", &argoPlugin{Name: "argocd-vault-plugin", Parameters: []argoParam{
					{Name: "release-name", String: strPtr("rel")},
					{Name: "helm-parameters", Map: map[string]string{"replicas": "2"}},
				}})
				if err != nil {
					t.Fatal(err)
				}
				if d := secretData(t, resp, "rel-db"); d["password"] != password {
					t.Errorf("Secret/rel-db: want the chart's placeholder replaced")
				}
				cm, ok := objectsByName(t, resp.Manifests)["ConfigMap/rel-settings"]
				if data, _ := cm["data"].(map[string]any); !ok || data["replicas"] != "2" {
					t.Errorf("ConfigMap/rel-settings %v: want the helm-parameters value", cm)
				}
			})
			t.Run("a kustomization", func(t *testing.T) {
				resp, err := s.generate(rs, "shop", "avp/kustomize", plugin)
				if err != nil {
					t.Fatal(err)
				}
				if d := secretData(t, resp, "db"); d["password"] != password {
					t.Errorf("Secret/db: want <password> replaced")
				}
			})
			t.Run("a secret the role may not read: Vault's refusal, no value", func(t *testing.T) {
				_, err := s.generate(rs, "shop", "avp/denied", plugin)
				if err == nil || !strings.Contains(err.Error(), "permission denied") {
					t.Fatalf("err %v, want Vault's permission denied", err)
				}
				t.Logf("Argo CD shows: %v", err)
				noValue(t, "the error Argo CD shows", err.Error())
			})
			t.Run("no value in any process's log", func(t *testing.T) {
				all, err := os.ReadFile(env.logFile.Name())
				if err != nil {
					t.Fatal(err)
				}
				noValue(t, "the processes' log", string(all))
			})
		})
	}
	t.Logf("TestArgoCDVaultPluginThroughArgoCD took %s", time.Since(start).Round(time.Millisecond))
}
