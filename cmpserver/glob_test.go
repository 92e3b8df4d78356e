package cmpserver

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestGlobAny(t *testing.T) {
	root := writeTree(t, map[string]string{
		"app/Chart.yaml": "", "app/templates/deploy.yaml": "", "app/.hidden/x.json": "",
		"app/deep/a/b/c/main.jsonnet": "", "other/kustomization.yaml": "",
	})
	if err := os.Symlink("../other", filepath.Join(root, "app", "linked")); err != nil {
		t.Fatal(err)
	}
	app := filepath.Join(root, "app")
	for pattern, want := range map[string]bool{
		"Chart.yaml":                  true,
		"./Chart.yaml":                true,
		"missing.yaml":                false,
		"*.yaml":                      true,
		"*.json":                      false,
		"**/*.json":                   true, // dot dirs are not special
		"**/main.jsonnet":             true,
		"deep/**/c/main.jsonnet":      true,
		"deep/**/a/b/c/main.jsonnet":  true,  // ** matches zero dirs
		"**/kustomization.yaml":       false, // symlinked dirs are not followed by **
		"linked/kustomization.yaml":   true,  // but a literal path through a link is
		"../other/*.yaml":             true,
		"templates/*.{yml,yaml}":      true,
		"{templates,deep}/*.{yml,js}": false,
		"Chart.yaml/x":                false,
		"**":                          true,
		"[":                           false, // no wildcard: a literal name, as in Argo CD
		"missing/**/*.yaml":           false,
		"{../../../etc,x}/*":          false, // braces cannot leave: the walk starts inside
		strings.Repeat("{a,b}", 40):   false, // one regular expression, not 2^40 patterns
	} {
		got, err := globAny(root, app, pattern)
		if err != nil || got != want {
			t.Errorf("globAny(%q) = %v, %v; want %v", pattern, got, err, want)
		}
	}
	for _, bad := range []string{"../../*", "../../x/**/y"} {
		if _, err := globAny(root, app, bad); err == nil {
			t.Errorf("globAny(%q) accepted", bad)
		}
	}
}

func TestSplitManifests(t *testing.T) {
	// YAML stream: converted to JSON; comment-only and null documents dropped.
	got, err := splitManifests([]byte("---\n# comment only\n---\na: 1\n---\nnull\n---\n\nb: [x]\n"))
	if want := []string{`{"a":1}`, `{"b":["x"]}`}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("YAML stream = %q, %v", got, err)
	}
	// JSON stream: values kept as printed, null dropped.
	got, err = splitManifests([]byte("{\"a\": 1}\nnull\n{\"b\":2}\n"))
	if want := []string{`{"a": 1}`, `{"b":2}`}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("JSON stream = %q, %v", got, err)
	}
	if _, err := splitManifests([]byte("a: [\n")); err == nil || !strings.Contains(err.Error(), "failed to unmarshal manifest") {
		t.Errorf("bad YAML: %v", err)
	}
	if got, err := splitManifests(nil); err != nil || len(got) != 0 {
		t.Errorf("empty output = %q, %v", got, err)
	}
}
