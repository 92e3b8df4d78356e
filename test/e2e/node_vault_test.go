package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// checkVaultOnNode is the helmfile plugin's Vault flow on the real node: the
// chart's example helmfile entry injected into the repo-server, the kubelet
// projecting the sidecar's token for the audience vault, vals (inside
// helmfile) logging in to a real Vault with it through Vault's Kubernetes
// auth, and Vault checking it with the real apiserver's TokenReview. No token
// is made by the test: only the kubelet's projection can log in as the
// repo-server's ServiceAccount for that audience. The rendered Secret carries
// the value only Vault holds; the value is in no container's log. Two
// tenants (issue 26), each with its own entry, role, token audience and
// project, read only their own secret.
func checkVaultOnNode(t *testing.T, node *harness.Node, chart *harness.ChartInstall, rel harness.ArgoRelease, repoURL, commit string) {
	harness.RequireVault(t, filepath.Join(env.repo, "bin"))
	c := env.cp.Client()
	vault, values := hfVault(t, filepath.Join(env.root, "node-vault"))
	planted := values["app"]
	// Vault runs on the host; the pods reach it through the node's gateway.
	podAddr, err := node.Expose(strings.TrimPrefix(vault.Addr, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	if err := vault.EnableKubernetesAuth(c, chainNS); err != nil {
		t.Fatal(err)
	}
	settings := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "vault-settings"},
		"data": map[string]any{"VAULT_ADDR": "http://" + podAddr, "VAULT_ROLE_ID": hfRole}}
	if err := c.Apply("/api/v1/namespaces/"+chainNS+"/configmaps", "vault-settings", settings); err != nil {
		t.Fatal(err)
	}
	// The chart's example catalog has the helmfile entry; the two tenants'
	// entries (issue 26: their own role, token audience and project) are
	// values of the chart, as an admin adds plugins. The namespace may use
	// all three, with native sidecars again after the classic case.
	var cat map[string]any
	if err := yaml.Unmarshal(catalogFor(t, true, map[string][]string{"*": {"helmfile"}}), &cat); err != nil {
		t.Fatal(err)
	}
	base := cat["plugins"].(map[string]any)["helmfile"].(map[string]any)
	plugins := []string{"helm", "kustomize", "params", "broken", "helmfile"}
	set := []string{"--set", "catalog.nativeSidecars=true", "--set", "catalog.revision=node-vault"}
	for _, team := range []string{hfTenantA, hfTenantB} {
		entry, err := json.Marshal(helmfileTenant(t, base, team))
		if err != nil {
			t.Fatal(err)
		}
		set = append(set, "--set-json", "catalog.plugins.helmfile-"+team+"="+string(entry))
		plugins = append(plugins, "helmfile-"+team)
	}
	names, err := json.Marshal(plugins)
	if err != nil {
		t.Fatal(err)
	}
	if err := chart.Upgrade(append(set, "--set-json", "catalog.namespaces.argocd="+string(names))...); err != nil {
		t.Fatal(err)
	}
	pod := rollToRevision(t, fmt.Sprintf(`"cmp-injector.io/plugins":%q`, strings.Join(plugins, ", ")), "node-vault")
	ready, err := node.WaitPodReady(c, chainNS, pod.Name, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	account := ready.Spec.ServiceAccountName
	if account == "" {
		account = "default"
	}
	if err := vault.KubernetesRole(hfRole, chainNS, account, harness.VaultAudience, "app"); err != nil {
		t.Fatal(err)
	}
	for _, team := range []string{hfTenantA, hfTenantB} {
		if err := vault.KubernetesRole(team, chainNS, account, "vault-"+team, team); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := harness.NodeRepoServer(node, ready, rel)
	if err != nil {
		t.Fatal(err)
	}
	var resp manifestResponse
	if err := rs.Call("generate", manifestRequest{Repo: &argoRepo{Repo: repoURL}, Revision: "HEAD", NoCache: true,
		AppName: "vault-app", Namespace: "demo", KubeVersion: kubeVersion(), APIVersions: []string{"v1"},
		ProjectName: "default", ProjectSourceRepos: []string{"*"},
		ApplicationSource: &argoSource{RepoURL: repoURL, Path: "helmfile", TargetRevision: "HEAD", Plugin: &argoPlugin{Name: "helmfile"}}}, &resp); err != nil {
		t.Fatal(err)
	}
	if got := hfPassword(t, resp, "app-db"); got != planted || resp.Revision != commit {
		t.Errorf("rendered at %s a password %q; want %s and Vault's value", resp.Revision, got, commit)
	}
	t.Logf("pod %s (ServiceAccount %s): helmfile rendered Secret/app-db with Vault's value, logged in with the kubelet's projected token", ready.Name, account)
	// Each tenant's sidecar has its own projected token (its own audience):
	// each project reads only its own secret, through its own plugin.
	t.Run("two tenants, each reads only its own secret", func(t *testing.T) {
		hfTenants(t, &libraryStack{ns: chainNS, repoURL: repoURL, commit: commit}, rs, values)
	})
	logs := node.ContainerLogs(ready)
	all, err := os.ReadFile(env.logFile.Name())
	if err != nil {
		t.Fatal(err)
	}
	for path, v := range values {
		for name, log := range logs {
			if strings.Contains(log, v) {
				t.Errorf("the value of secret/%s is in container %s's log", path, name)
			}
		}
		if strings.Contains(string(all), v) {
			t.Errorf("the value of secret/%s is in the processes' log", path)
		}
	}
}
