package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cmp-injector/cmp-injector/cmpserver/unpack/tartest"
)

func TestGlobAny(t *testing.T) {
	root := tartest.Tree(t, map[string]string{
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
		"**":                          true,
		strings.Repeat("{a,b}", 40):   false, // one regular expression, not 2^40 patterns
	} {
		got, err := globAny(root, app, pattern)
		if err != nil || got != want {
			t.Errorf("globAny(%q) = %v, %v; want %v", pattern, got, err, want)
		}
	}
	// A path that does not exist fails, as zglob fails Argo CD's discovery
	// (a pattern without wildcards that names nothing, or a missing fixed
	// part); braces cannot leave the repository: the walk starts inside.
	for _, missing := range []string{"missing.yaml", "Chart.yaml/x", "[", "missing/**/*.yaml", "{../../../etc,x}/*"} {
		_, err := globAny(root, app, missing)
		want := "error finding glob match for pattern " + strconv.Quote(filepath.Join(app, missing)) + ": "
		if !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(fmt.Sprint(err), want) {
			t.Errorf("globAny(%q): %v, want %s... (file does not exist)", missing, err, want)
		}
	}
	for _, bad := range []string{"../../*", "../../x/**/y"} {
		if _, err := globAny(root, app, bad); err == nil {
			t.Errorf("globAny(%q) accepted", bad)
		}
	}
}
