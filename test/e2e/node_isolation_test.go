package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// checkIsolationOnNode runs what a tenant's repository can run in its
// plugin's sidecar (the chain catalog's intruder plugin) through Argo CD's
// repo-server on the real node, after a stand-in for an SSH key is put in the
// repo-server's /dev/shm, where Argo CD writes the keys it clones with. The
// command must find no socket but its own, fail to delete params' socket
// (which must still serve), and see a /dev/shm without the key. Before
// private socket directories, every sidecar mounted the whole directory:
// the command listed, deleted and could dial every plugin's socket.
func checkIsolationOnNode(t *testing.T, node *harness.Node, rs *harness.RepoServer, pod *corev1.Pod, repoURL string) {
	t.Helper()
	root, err := node.ContainerRoot(pod, repoServer)
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(root, keys.ShmDir, "e2e-ssh-key")
	if err := os.WriteFile(key, []byte("stand-in for a private key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(key)

	generate := func(app, plugin string) []string {
		t.Helper()
		var resp manifestResponse
		if err := rs.Call("generate", manifestRequest{Repo: &argoRepo{Repo: repoURL}, Revision: "HEAD", NoCache: true,
			AppName: app, Namespace: "demo", KubeVersion: kubeVersion(), ProjectName: "default", ProjectSourceRepos: []string{"*"},
			ApplicationSource: &argoSource{RepoURL: repoURL, Path: "apps/params", TargetRevision: "HEAD", Plugin: &argoPlugin{Name: plugin}}}, &resp); err != nil {
			t.Fatalf("%s: %v", plugin, err)
		}
		return resp.Manifests
	}
	out := generate("intruder", "intruder")
	if len(out) != 1 {
		t.Fatalf("intruder rendered %v", out)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := json.Unmarshal([]byte(out[0]), &cm); err != nil {
		t.Fatalf("%v: %s", err, out[0])
	}
	t.Logf("what the intruder's command found: %q", cm.Data)
	own := keys.PluginSocketDir + "/intruder.sock"
	if got := strings.Fields(cm.Data["sockets"]); !slices.Equal(got, []string{own}) {
		t.Errorf("the command reached the sockets %v, want only its own %s", got, own)
	}
	if got := strings.Fields(cm.Data["dir"]); !slices.Equal(got, []string{"intruder.sock"}) {
		t.Errorf("its socket directory holds %v, want only intruder.sock", got)
	}
	if strings.Contains(cm.Data["shm"], "e2e-ssh-key") {
		t.Errorf("the command sees the repo-server's /dev/shm: %q", cm.Data["shm"])
	}
	// params' socket is where the repo-server looks, and still serves.
	if fi, err := os.Lstat(filepath.Join(root, keys.PluginSocketDir, "params.sock")); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("params.sock in the repo-server's socket dir: %v", err)
	}
	if got := generate("after-intruder", "params"); len(got) != 1 {
		t.Errorf("params after the intruder rendered %v", got)
	}
}
