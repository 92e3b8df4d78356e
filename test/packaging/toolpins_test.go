package packaging

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestToolModulesMatchPins: a tool built from a tools module (test/e2e/tools/<dir>,
// needed where the tool's go.mod has replace blocks) builds the version its
// go.mod requires, while images, docs and the cache directory name use
// hack/versions.sh's pin; the two must be the same or the cache would label one
// release with another's number.
func TestToolModulesMatchPins(t *testing.T) {
	r := repo(t)
	versions, err := os.ReadFile(filepath.Join(r, "hack", "versions.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ pin, dir, module string }{
		{"ARGOCD_VERSION", "argocd", "github.com/argoproj/argo-cd/v3"},
		{"ARGOCD_V2_VERSION", "argocd-v2", "github.com/argoproj/argo-cd/v2"},
		{"ARGOCD_OPERATOR_VERSION", "argocd-operator", "github.com/argoproj-labs/argocd-operator"},
		{"HELMFILE_VERSION", "helmfile", "github.com/helmfile/helmfile"},
		{"VAULT_VERSION", "vault", "github.com/hashicorp/vault"},
	} {
		pin := regexp.MustCompile(`(?m)^` + c.pin + `=(\S+)$`).FindSubmatch(versions)
		if pin == nil {
			t.Errorf("hack/versions.sh has no %s", c.pin)
			continue
		}
		mod, err := os.ReadFile(filepath.Join(r, "test", "e2e", "tools", c.dir, "go.mod"))
		if err != nil {
			t.Error(err)
			continue
		}
		req := regexp.MustCompile(`(?m)^(?:require)?\s+` + regexp.QuoteMeta(c.module) + `\s+(\S+)\s*$`).FindSubmatch(mod)
		switch {
		case req == nil:
			t.Errorf("test/e2e/tools/%s/go.mod does not require %s directly", c.dir, c.module)
		case string(req[1]) != string(pin[1]):
			t.Errorf("test/e2e/tools/%s/go.mod requires %s %s, hack/versions.sh pins %s=%s", c.dir, c.module, req[1], c.pin, pin[1])
		}
	}
}
