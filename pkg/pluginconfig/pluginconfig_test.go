package pluginconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const example3 = `apiVersion: argoproj.io/v1alpha1
kind: ConfigManagementPlugin
metadata:
  name: simple-helm-cmp
spec:
  version: v1.0
  generate:
    command: [/home/argocd/generate.sh]
  discover:
    fileName: "./values.yaml"
  parameters:
    static:
    - name: values-files
      title: VALUES FILES
      collectionType: array
    dynamic:
      command: [/home/argocd/get-parameters.sh]
`

func TestParseExample3(t *testing.T) {
	p, warnings, err := Parse([]byte(example3))
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings = %q", warnings)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := p.SocketName(); got != "simple-helm-cmp-v1.0.sock" {
		t.Errorf("SocketName = %q", got)
	}
	if !p.DiscoveryConfigured() || !p.Concurrent() {
		t.Errorf("discovery %v concurrent %v", p.DiscoveryConfigured(), p.Concurrent())
	}
	if p.Spec.Parameters.Static[0].CollectionType != "array" || p.Spec.Parameters.Dynamic.Command[0] != "/home/argocd/get-parameters.sh" {
		t.Errorf("parameters = %+v", p.Spec.Parameters)
	}
}

func TestParseWarnsOnUnknownKeys(t *testing.T) {
	doc := `kind: ConfigManagementPlugin
metadata: {name: x, labels: {a: b}}
spec:
  generate: {command: [sh], arg: [x]}
  paramters: {static: []}
  lockRepo: true
  allowConcurrency: false
  Discover: {find: {glob: "**/*.yaml", comand: [x]}}
`
	p, warnings, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(warnings, "\n")
	for _, want := range []string{`"metadata.labels"`, `"spec.generate.arg"`, `"spec.paramters"`, "lockRepo is ignored", `"spec.Discover" is spelled`, `"spec.Discover.find.comand"`} {
		if !strings.Contains(joined, want) {
			t.Errorf("warnings lack %s:\n%s", want, joined)
		}
	}
	if p.Concurrent() {
		t.Error("allowConcurrency: false not honoured")
	}
	if p.Spec.Discover == nil || p.Spec.Discover.Find.Glob != "**/*.yaml" {
		t.Errorf("case-insensitive key not decoded: %+v", p.Spec.Discover)
	}
}

func TestValidateNamesEveryBadField(t *testing.T) {
	doc := `kind: Plugin
metadata: {name: "a/b"}
spec:
  version: ".."
  init: {args: [x]}
  generate: {args: [x]}
  discover: {find: {args: [yy]}}
  parameters:
    static:
    - title: No name
    - name: weird
      collectionType: list
    dynamic: {command: [""]}
`
	p, _, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	err = p.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"kind should be ConfigManagementPlugin", "metadata.name \"a/b\"", "spec.version", "spec.init.args", "spec.generate.command should be non-empty", "spec.discover.find.args", "static[0]: name is required (entry titled \"No name\")", "unknown collectionType \"list\"", "spec.parameters.dynamic.command[0]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if strings.Count(err.Error(), "invalid plugin configuration") != 1 {
		t.Errorf("not one message: %v", err)
	}
}

func TestParseRejectsNonMappings(t *testing.T) {
	for _, doc := range []string{"", "null", "- a\n- b", "kind: [", "spec: {generate: {command: sh}}", "metadata: 3"} {
		if _, _, err := Parse([]byte(doc)); err == nil {
			t.Errorf("Parse(%q) succeeded", doc)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := Load(ConfigPath(dir)); err == nil {
		t.Error("missing file accepted")
	}
	if err := os.WriteFile(filepath.Join(dir, "plugin.yaml"), []byte("kind: ConfigManagementPlugin\nmetadata: {name: demo}\nspec: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Load(ConfigPath(dir)); err == nil || !strings.Contains(err.Error(), "spec.generate.command") {
		t.Errorf("Load = %v", err)
	}
}

func TestDiscoveryWarning(t *testing.T) {
	p, warnings, err := Parse([]byte("kind: ConfigManagementPlugin\nmetadata: {name: demo}\nspec: {generate: {command: [x]}, discover: {fileName: a, find: {glob: b}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.SocketName() != "demo.sock" {
		t.Errorf("SocketName = %q", p.SocketName())
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "spec.discover.find.glob ignored") {
		t.Errorf("warnings = %q", warnings)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(example3))
	f.Add([]byte("kind: ConfigManagementPlugin\nmetadata: {name: demo}\nspec: {generate: {command: [x]}, paramters: 1}\n"))
	f.Add([]byte("{\"spec\":{\"parameters\":{\"static\":[{\"map\":{\"a\":\"b\"}}]}}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, _, err := Parse(data)
		if err != nil {
			return
		}
		if err := p.Validate(); err == nil {
			if p.Metadata.Name == "" || len(p.Spec.Generate.Command) == 0 || strings.Contains(p.SocketName(), "/") {
				t.Fatalf("invalid plugin validated: %+v", p)
			}
		}
	})
}
