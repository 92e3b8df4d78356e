package unpack

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmp-injector/cmp-injector/cmpserver/unpack/tartest"
)

// treeShape is every path of a tree with its type, permissions and link
// target: what a discovery rule by file name or glob can see.
func treeShape(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		shape := fi.Mode().String()
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			shape += " -> " + target
		}
		out[rel] = shape
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNamesOnlyKeepsTheShapeWithoutContent: a names-only tree has the same
// paths, types, modes and links as the full one, every file empty; and
// what the limits refuse is refused the same way.
func TestNamesOnlyKeepsTheShapeWithoutContent(t *testing.T) {
	tgz := tartest.Tgz(t,
		tartest.Dir("app"), tartest.File("app/kustomization.yaml", "resources: [a.yaml]\n"),
		tartest.File("app/a.yaml", strings.Repeat("x", 100_000)), tartest.Dir("app/deep"), tartest.Dir("app/deep/x"),
		tartest.File("app/deep/x/main.jsonnet", "{}"), tartest.Symlink("app/link.yaml", "a.yaml"),
		tartest.Symlink("app/dangling.yaml", "missing.yaml"), tartest.Symlink("app/up", "deep"),
		tartest.Entry{Hdr: tartest.Header("app/run.sh", 0o755, 3), Body: "ls\n"})
	for _, preserve := range []bool{false, true} {
		full, names := t.TempDir(), t.TempDir()
		if err := extractTgzWith(bytes.NewReader(tgz), full, extractOptions{limits: DefaultLimits(), preserveMode: preserve}); err != nil {
			t.Fatal(err)
		}
		if err := extractTgzWith(bytes.NewReader(tgz), names, extractOptions{limits: DefaultLimits(), preserveMode: preserve, namesOnly: true}); err != nil {
			t.Fatal(err)
		}
		a, b := treeShape(t, full), treeShape(t, names)
		if len(a) != len(b) {
			t.Fatalf("preserveMode %v: full tree %v, names-only %v", preserve, a, b)
		}
		for p, s := range a {
			if b[p] != s {
				t.Errorf("preserveMode %v: %s is %q in the full tree, %q names-only", preserve, p, s, b[p])
			}
		}
		_ = filepath.WalkDir(names, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if fi, _ := d.Info(); fi.Size() != 0 {
					t.Errorf("%s has %d bytes names-only", p, fi.Size())
				}
			}
			return nil
		})
	}
	limits := DefaultLimits()
	limits.MaxExtractedBytes = 50_000
	errFull := extractTgzWith(bytes.NewReader(tgz), t.TempDir(), extractOptions{limits: limits})
	errNames := extractTgzWith(bytes.NewReader(tgz), t.TempDir(), extractOptions{limits: limits, namesOnly: true})
	if errFull == nil || errNames == nil || errFull.Error() != errNames.Error() {
		t.Errorf("over the extracted-bytes limit: full %v, names-only %v", errFull, errNames)
	}
}
