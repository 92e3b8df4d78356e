package catalog

import (
	"strings"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// The injector writes keys.EnvSecretEnv from the entry's Secret references;
// an entry may not set it (the sidecar would get two values, and the plugin
// server would redact what the admin typed instead of what it is given).
func TestCatalogMayNotSetTheSecretRule(t *testing.T) {
	_, err := Parse([]byte(sidecarCatalog("    env: [{name: "+keys.EnvSecretEnv+", value: X}]\n", "")))
	want := "plugins.p.env[0].name: " + keys.EnvSecretEnv + " is set by the injector"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err %v, want %q", err, want)
	}
}

// InjectorEnv is what adopt keeps out of an entry's env: it must be exactly
// what the loader refuses there, whatever else the entry sets, or adopt
// would write a catalog that does not load.
func TestInjectorEnvIsRefusedInEnv(t *testing.T) {
	names := InjectorEnv()
	if len(names) == 0 {
		t.Fatal("no names")
	}
	for _, name := range names {
		_, err := Parse([]byte(sidecarCatalog("    env: [{name: "+name+", value: '1'}]\n", "")))
		want := "plugins.p.env[0].name: " + name + " is set by the injector"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", name, err, want)
		}
	}
}
