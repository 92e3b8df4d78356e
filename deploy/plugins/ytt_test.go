package plugins

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/params"
)

// TestYtt runs the ytt plugin.yaml with the pinned ytt of bin/ on the test
// app (a schema and templates in the manner of ytt's own examples, a data
// values file for production beside it).
func TestYtt(t *testing.T) {
	if _, err := os.Stat(filepath.Join(toolsBin, "ytt")); err != nil {
		t.Fatalf("ytt not found in %s: run hack/tools.sh ytt", toolsBin)
	}
	inv := func(ps ...params.AppParameter) invocation {
		return invocation{config: "ytt", app: filepath.Join("ytt", "app"), params: ps, args: []string{"--repo-root", "testdata", "--app-name", "shop"}}
	}
	t.Run("the schema's defaults", func(t *testing.T) {
		objs := generate(t, inv())
		if got := strings.Join(names(objs), ","); got != "ConfigMap/shop-env,Deployment/shop" {
			t.Fatalf("objects %s", got)
		}
		if r := field(objs["Deployment/shop"], "spec", "replicas"); r != float64(1) {
			t.Errorf("replicas %v, want the schema's 1", r)
		}
	})
	t.Run("a data values file, typed and string values", func(t *testing.T) {
		objs := generate(t, inv(
			params.AppParameter{Name: "data-values-files", Array: []string{"../envs/prod.yml"}},
			params.AppParameter{Name: "data-values", Map: map[string]string{"name": "web", "env.greeting": hostile}},
			params.AppParameter{Name: "data-values-yaml", Map: map[string]string{"replicas": "5"}},
		))
		d := objs["Deployment/web"]
		if r := field(d, "spec", "replicas"); r != float64(5) {
			t.Errorf("replicas %v, want 5 (data-values-yaml wins over the file's 3)", r)
		}
		if img := field(d, "spec", "template", "spec", "containers", 0, "image"); img != "registry.example.com/shop:2.1" {
			t.Errorf("image %v, want the file's tag 2.1", img)
		}
		if g := field(objs["ConfigMap/web-env"], "data", "GREETING"); g != hostile {
			t.Errorf("GREETING %q, want the value as typed", g)
		}
	})
	t.Run("a value the schema refuses: ytt's error", func(t *testing.T) {
		refused(t, withAction(inv(params.AppParameter{Name: "data-values", Map: map[string]string{"replicas": "three"}}), "generate"), "expected: integer (by schema.yml:5)")
	})
	t.Run("an absolute path is refused before ytt runs", func(t *testing.T) {
		refused(t, withAction(inv(params.AppParameter{Name: "data-values-files", Array: []string{"/etc/passwd"}}), "generate"), "must be a path relative")
	})
}
