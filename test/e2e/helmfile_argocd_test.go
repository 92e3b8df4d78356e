package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestHelmfileThroughArgoCD: the example catalog's helmfile entry through Argo
// CD's own repo-server, without Vault (TestHelmfileVault, make e2e-vault, has
// it): the same test app with vals' echo provider in place of its ref+vault://
// reference, so helmfile, vals and the local chart render in the injected
// sidecar with the entry's settings (envFrom vault-settings, the projected
// token of audience vault, HELMFILE_DISABLE_INSECURE_FEATURES), named and by
// Argo CD's discovery; a template that reads the token file is refused with
// helmfile's reason in Argo CD's error.
func TestHelmfileThroughArgoCD(t *testing.T) {
	tree := t.TempDir()
	app := filepath.Join(tree, "helmfile-echo")
	if err := os.CopyFS(app, os.DirFS(filepath.Join(libraryRepo, "helmfile"))); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(app, "helmfile.yaml.gotmpl")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	const echoed = "rendered-by-vals"
	echo := strings.Replace(string(b), "ref+vault://secret/app#/password", "ref+echo://"+echoed, 1)
	if echo == string(b) {
		t.Fatal("the test app has no ref+vault://secret/app#/password")
	}
	if err := os.WriteFile(file, []byte(echo), 0o644); err != nil {
		t.Fatal(err)
	}

	s := startLibrary(t, []string{"helmfile"}, tree)
	// The entry's envFrom names a required ConfigMap: the kubelet (and the
	// boot) would not start the sidecar without it. Nothing reaches this address.
	settings := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "vault-settings"},
		"data": map[string]any{"VAULT_ADDR": "http://127.0.0.1:1", "VAULT_ROLE_ID": "unused"}}
	if err := env.cp.Client().Apply("/api/v1/namespaces/"+s.ns+"/configmaps", "vault-settings", settings); err != nil {
		t.Fatal(err)
	}
	for i, rel := range s.rels {
		t.Run("Argo CD "+rel.Version, func(t *testing.T) {
			rs, _ := s.bootRepoServer(t, rel, "helmfile", "hfecho"+strconv.Itoa(i))
			for _, plugin := range []*argoPlugin{{Name: "helmfile"}, {}} {
				resp, err := s.generate(rs, "echo-app", "helmfile-echo", plugin)
				if err != nil {
					t.Fatalf("plugin %+v: %v", plugin, err)
				}
				if got := hfPassword(t, resp, "app-db"); got != echoed || resp.SourceType != "Plugin" || resp.Revision != s.commit {
					t.Errorf("plugin %+v (empty: discovery by helmfile.yaml*): %s at %s, password %q; want Plugin, %s and %q",
						plugin, resp.SourceType, resp.Revision, got, s.commit, echoed)
				}
			}
			_, err := s.generate(rs, "read-token", "helmfile-tenants/read-token", &argoPlugin{Name: "helmfile"})
			if err == nil || !strings.Contains(err.Error(), "insecure function calls are disabled") {
				t.Errorf("err %v, want helmfile's refusal of a template that reads a file", err)
			}
		})
	}
}
