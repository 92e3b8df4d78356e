package pluginconfig

import (
	"bytes"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

// YAML 1.1 reads a plain N, y, yes, no, on, off as a boolean, so a plugin.yaml
// whose parameter is named N (its env PARAM_N) or whose command has an
// argument "on" was refused with "cannot unmarshal bool". Where the field is
// a string, Parse now keeps the plain scalar's text, as sigs.k8s.io/yaml's
// Unmarshal does for a typed target. A map key is not a field: go-yaml makes
// a plain N key the boolean false and YAMLToJSON writes it "false", with or
// without a target, so the test's map key is not such a word. Where the
// field is a bool (required), yes stays YAML 1.1's true.
func TestPlainYAMLBooleanWordsAreStringsWhereStringsAreExpected(t *testing.T) {
	doc := `apiVersion: argoproj.io/v1alpha1
kind: ConfigManagementPlugin
metadata: {name: words}
spec:
  generate: {command: [sh, -c, 'echo "$@"', N, on, off, yes, no, y]}
  parameters:
    static:
    - name: N
      string: yes
      required: yes
    - name: on
      array: [Y, n, Off]
      map: {k: no}
`
	p, _, err := Decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"sh", "-c", `echo "$@"`, "N", "on", "off", "yes", "no", "y"}; !reflect.DeepEqual(p.Spec.Generate.Command, want) {
		t.Errorf("command %q, want %q", p.Spec.Generate.Command, want)
	}
	st := p.Spec.Parameters.Static
	if len(st) != 2 || st[0].Name != "N" || st[0].String != "yes" || !st[0].Required || st[1].Name != "on" ||
		!reflect.DeepEqual(st[1].Array, []string{"Y", "n", "Off"}) || !reflect.DeepEqual(st[1].Map, map[string]string{"k": "no"}) {
		t.Errorf("static parameters %+v", st)
	}
}

// FuzzQuoteYAML11Words: quoting only ever inserts pairs of double quotes
// (the rest of the document is untouched), and a document YAML 1.1 parses
// still parses once quoted. Seeds: testdata/fuzz/FuzzQuoteYAML11Words.
func FuzzQuoteYAML11Words(f *testing.F) {
	f.Add([]byte("spec:\n  generate: {command: [sh, N, on, 'off', \"yes\", y]}\n  parameters:\n    static: [{name: N, required: yes}]\n"))
	f.Add([]byte("metadata: {name: ö, labels: {N: N}}\nspec: {generate: {command: [é, N]}}\n"))
	f.Add([]byte("spec:\n  generate:\n    command:\n    - &a N\n    - *a\n    - !!bool on\n    - !!str off\n"))
	f.Add([]byte("spec: {version: no}\r\nmetadata:\r\n  name: YES\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		out := QuoteYAML11Words(data, reflect.TypeOf(Plugin{}), nil)
		added := len(out) - len(data)
		if added < 0 || added%2 != 0 || !bytes.Equal(bytes.ReplaceAll(out, []byte(`"`), nil), bytes.ReplaceAll(data, []byte(`"`), nil)) {
			t.Fatalf("%q quoted as %q: more than quotes changed", data, out)
		}
		if _, err := yaml.YAMLToJSON(data); err == nil {
			if _, err := yaml.YAMLToJSON(out); err != nil {
				t.Fatalf("%q parses, quoted %q does not: %v", data, out, err)
			}
		}
	})
}
