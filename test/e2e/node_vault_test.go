package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// checkVaultOnNode is the helmfile plugin's Vault flow on the real node: the
// chart's example helmfile entry injected into the repo-server, the kubelet
// projecting the sidecar's token for the audience vault, vals (inside
// helmfile) logging in to a real Vault with it through Vault's Kubernetes
// auth, and Vault checking it with the real apiserver's TokenReview. No token
// is made by the test: only the kubelet's projection can log in as the
// repo-server's ServiceAccount for that audience. The rendered Secret carries
// the value only Vault holds; the value is in no container's log.
func checkVaultOnNode(t *testing.T, node *harness.Node, chart *harness.ChartInstall, rel harness.ArgoRelease, repoURL, commit string) {
	harness.RequireVault(t, filepath.Join(env.repo, "bin"))
	c := env.cp.Client()
	vault, err := harness.StartVault(filepath.Join(env.root, "node-vault"), env.logFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vault.Stop)
	planted := hfPlanted(t, "app")
	if err := vault.PutSecret("app", map[string]string{"password": planted}); err != nil {
		t.Fatal(err)
	}
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
	// The chart's example catalog has the helmfile entry; the namespace may
	// now use it, with native sidecars again after the classic case.
	if err := chart.Upgrade("--set", "catalog.nativeSidecars=true", "--set", "catalog.revision=node-vault",
		"--set-json", `catalog.namespaces.argocd=["helm","kustomize","params","broken","helmfile"]`); err != nil {
		t.Fatal(err)
	}
	var pod *corev1.Pod
	err = harness.Eventually(90*time.Second, time.Second, func() (bool, error) {
		gen := patchDeployment(t, fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{
			"cmp-injector.io/plugins":"helm, kustomize, params, broken, helmfile","e2e/restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339Nano)), false)
		r, err := c.WaitRollout(chainNS, repoServer, harness.RepoServerSelector, gen, 1, true, 60*time.Second)
		if err != nil {
			return false, err
		}
		pod = &r.Pods[0]
		return status(t, pod).Revision == "node-vault", fmt.Errorf("the injector still serves revision %q", status(t, pod).Revision)
	})
	if err != nil {
		t.Fatal(err)
	}
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
	for name, log := range node.ContainerLogs(ready) {
		if strings.Contains(log, planted) {
			t.Errorf("the value is in container %s's log", name)
		}
	}
	if all, err := os.ReadFile(env.logFile.Name()); err != nil {
		t.Fatal(err)
	} else if strings.Contains(string(all), planted) {
		t.Error("the value is in the processes' log")
	}
}
