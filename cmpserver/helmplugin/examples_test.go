package helmplugin

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
)

// TestExampleCatalogInlinesEachPluginYAML keeps deploy/plugins/catalog.yaml and the
// plugin.yaml files next to it identical, and both loadable.
func TestExampleCatalogInlinesEachPluginYAML(t *testing.T) {
	plugins := filepath.Join("..", "..", "deploy", "plugins")
	cat, err := catalog.Load(filepath.Join(plugins, "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := filepath.Glob(filepath.Join(plugins, "*", "plugin.yaml"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no example plugins: %v", err)
	}
	for _, f := range dirs {
		name := filepath.Base(filepath.Dir(f))
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want, warnings, err := pluginconfig.Parse(data)
		if err != nil || len(warnings) > 0 {
			t.Fatalf("%s: %v %v", f, err, warnings)
		}
		if err := want.Validate(); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(f), "README.md")); err != nil {
			t.Errorf("%s has no README.md", name)
		}
		e, ok := cat.Plugins[name]
		if !ok {
			t.Errorf("catalog.yaml lacks plugin %q", name)
			continue
		}
		if !reflect.DeepEqual(e.Parsed, want) {
			t.Errorf("catalog.yaml plugins.%s.config.inline differs from %s", name, f)
		}
	}
	if len(cat.Plugins) != len(dirs) {
		t.Errorf("catalog has %d plugins, deploy/plugins has %d", len(cat.Plugins), len(dirs))
	}
}
