package cmpserver

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// streamLayers are cmpserver's packages along a request, each importing only
// those after it (README, "Code"): the service drives the request, the
// request the engine, the engine the receiving side and the commands, and
// those the helpers at the bottom. A package listed here may import none of
// the cmpserver packages listed before it.
var streamLayers = []string{
	"cmpserver",
	"cmpserver/engine",
	"cmpserver/unpack",
	"cmpserver/command",
	"cmpserver/manifests",
	"cmpserver/unlinked",
}

const module = "github.com/cmp-injector/cmp-injector/"

// TestStreamLayers: no package of the stream imports one above it, so the
// stream path reads top-down from the folder names (issue 27).
func TestStreamLayers(t *testing.T) {
	t.Parallel()
	for i, pkg := range streamLayers {
		above := map[string]bool{}
		for _, a := range streamLayers[:i] {
			above[module+a] = true
		}
		for _, imp := range packageImports(t, filepath.Join("..", pkg)) {
			if above[imp] {
				t.Errorf("%s imports %s, which stands above it", pkg, strings.TrimPrefix(imp, module))
			}
		}
	}
}

// packageImports lists what the non-test Go files of dir import.
func packageImports(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var imports []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			imports = append(imports, path)
		}
	}
	if len(imports) == 0 {
		t.Fatalf("no imports read in %s", dir)
	}
	return imports
}
