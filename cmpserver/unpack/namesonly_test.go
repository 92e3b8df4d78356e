package unpack

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
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

// A names-only unpack that Target.Settled ends early still reads the stream
// to its end and verifies its checksum: only the unpacking stops. Without
// NamesOnly, Settled is never asked (a tree a command runs on is complete).
func TestSettledStopsTheUnpackNotTheStream(t *testing.T) {
	t.Parallel()
	entries := []tartest.Entry{tartest.File("app/kustomization.yaml", "k")}
	for i := range 50 {
		entries = append(entries, tartest.File(fmt.Sprintf("docs/%02d.md", i), strings.Repeat("d", 5000)))
	}
	tgz := tartest.Tgz(t, entries...)
	sum := sha256.Sum256(tgz)
	for _, tc := range []struct {
		name      string
		checksum  string
		namesOnly bool
		wantErr   string
		settled   bool
		files     int
	}{
		{"settled", hex.EncodeToString(sum[:]), true, "", true, 1},
		{"wrong checksum", strings.Repeat("0", 64), true, "file checksum validation error", false, 0},
		{"a whole tree", hex.EncodeToString(sum[:]), false, "", false, 51},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := tartest.NewStream(tgz, "app")
			meta := s.Msgs[0].GetMetadata()
			meta.Checksum = tc.checksum
			s.Msgs = s.Msgs[1:] // Body reads what follows the header
			dir := t.TempDir()
			asked := 0
			to := &Target{Dir: dir, SpoolDir: t.TempDir(), Limits: DefaultLimits(), NamesOnly: tc.namesOnly,
				Settled: func(rel string) bool { asked++; return rel == filepath.Join("app", "kustomization.yaml") }}
			repo, err := NewReceiver(s, DefaultLimits(), 0).Body(meta, to)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Msgs) != 0 || repo.Size != int64(len(tgz)) {
				t.Errorf("%d messages left, %d of %d bytes received", len(s.Msgs), repo.Size, len(tgz))
			}
			if repo.Settled != tc.settled || repo.Files != tc.files || (asked > 0) != tc.namesOnly {
				t.Errorf("settled %v, %d entries unpacked, Settled asked %d times", repo.Settled, repo.Files, asked)
			}
			if _, err := os.Stat(filepath.Join(dir, "docs")); tc.settled != errors.Is(err, fs.ErrNotExist) {
				t.Errorf("docs/ after the match: %v", err)
			}
		})
	}
}
