package plugins

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/params"
)

// TestTanka runs the tanka plugin.yaml with the pinned tk of bin/ on the test
// project (jsonnetfile.json at its root, a library in lib/, the environment
// environments/default with its spec.json), as Argo CD unpacks a repository.
func TestTanka(t *testing.T) {
	if _, err := os.Stat(filepath.Join(toolsBin, "tk")); err != nil {
		t.Fatalf("tk not found in %s: run hack/tools.sh tk", toolsBin)
	}
	inv := func(ps ...params.AppParameter) invocation {
		return invocation{config: "tanka", app: filepath.Join("tanka", "environments", "default"), params: ps,
			args: []string{"--repo-root", "testdata", "--app-name", "grafana"}}
	}
	t.Run("the environment with its defaults", func(t *testing.T) {
		objs := generate(t, inv())
		if got := strings.Join(names(objs), ","); got != "Deployment/grafana,Service/grafana" {
			t.Fatalf("objects %s", got)
		}
		d := objs["Deployment/grafana"]
		if ns := field(d, "metadata", "namespace"); ns != "monitoring" {
			t.Errorf("namespace %v, want spec.json's monitoring", ns)
		}
		if r := field(d, "spec", "replicas"); r != float64(1) {
			t.Errorf("replicas %v, want 1", r)
		}
	})
	t.Run("top-level arguments and a target", func(t *testing.T) {
		objs := generate(t, inv(
			params.AppParameter{Name: "tlas", Map: map[string]string{"replicas": "3", "tag": "11.1.0"}},
			params.AppParameter{Name: "targets", Array: []string{"deployment/.*"}},
		))
		if got := strings.Join(names(objs), ","); got != "Deployment/grafana" {
			t.Fatalf("objects %s, want the target's Deployment alone", got)
		}
		d := objs["Deployment/grafana"]
		if r := field(d, "spec", "replicas"); r != float64(3) {
			t.Errorf("replicas %v, want 3", r)
		}
		if img := field(d, "spec", "template", "spec", "containers", 0, "image"); img != "grafana/grafana:11.1.0" {
			t.Errorf("image %v", img)
		}
	})
	t.Run("Jsonnet's error is what the user reads", func(t *testing.T) {
		refused(t, withAction(inv(params.AppParameter{Name: "tlas", Map: map[string]string{"replicas": "many"}}), "generate"), "many is not a base 10 integer")
	})
}
