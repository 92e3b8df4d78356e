package catalog

import (
	"strings"
	"testing"
)

// YAML 1.1 reads a plain y, Y, yes, n, N, no, on, off (and their case forms)
// as a boolean, so a catalog entry with an env var named N failed with
// "cannot unmarshal bool into Go struct field EnvVar.plugins.env.name of type
// string". Where the catalog expects a string, the plain word is the string
// (pluginconfig.QuoteYAML11Words); where it expects a bool, YAML 1.1 stays.
func TestPlainYAMLBooleanWordsAreStringsWhereStringsAreExpected(t *testing.T) {
	words := []string{"N", "n", "y", "Y", "yes", "no", "on", "off", "Off", "YES"}
	var env strings.Builder
	for _, w := range words {
		env.WriteString("    - name: " + w + "\n      value: " + w + "\n")
	}
	doc := `apiVersion: cmp-injector.io/v1alpha1
kind: PluginCatalog
defaults:
  copyImage: ghcr.io/cmp-injector/cmp-server:v0.1.0
plugins:
  helm:
    image: alpine/helm:3.16.2
    env:
` + env.String() + `    config:
      inline:
        apiVersion: argoproj.io/v1alpha1
        kind: ConfigManagementPlugin
        metadata: {name: helm}
        spec:
          generate: {command: [helm, template, .]}
          parameters:
            static: [{name: N, required: yes}]
namespaces:
  "*": [helm]
`
	c, err := Parse([]byte(doc))
	if err != nil {
		t.Fatalf("env names %v: %v", words, err)
	}
	// The inline plugin.yaml's parameter too, as the sidecar will read it.
	if y := c.Plugins["helm"].InlineYAML; !strings.Contains(y, `name: "N"`) || !strings.Contains(y, "required: true") {
		t.Errorf("inline plugin.yaml:\n%s\nwant parameter \"N\", required", y)
	}
	got := c.Plugins["helm"].Env
	if len(got) != len(words) {
		t.Fatalf("env %+v, want %d variables", got, len(words))
	}
	for i, w := range words {
		if got[i].Name != w || got[i].Value != w {
			t.Errorf("env[%d] = %s=%s, want %s=%s", i, got[i].Name, got[i].Value, w, w)
		}
	}
}

// The strings above relax nothing else: an unknown key and a mapping where a
// string belongs are still errors.
func TestStringWordsKeepStrictness(t *testing.T) {
	for name, tc := range map[string]struct{ doc, want string }{
		"unknown key":          {"apiVersion: cmp-injector.io/v1alpha1\nkind: PluginCatalog\nplugins:\n  helm:\n    image: x\n    imgae: N\n", `unknown field "plugins.helm.imgae"`},
		"mapping for a string": {"apiVersion: cmp-injector.io/v1alpha1\nkind: PluginCatalog\nplugins:\n  helm:\n    image: {a: b}\n", "cannot unmarshal object"},
	} {
		_, err := Parse([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}
