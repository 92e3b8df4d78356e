package unpack

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmp-injector/cmp-injector/cmpserver/unpack/tartest"
)

// Symlink chains that would escape if their targets were kept verbatim (a -> .,
// b -> a/..) are recreated with the lexically resolved target, so they stay inside.
func TestExtractNeutralisesSymlinkChains(t *testing.T) {
	for name, entries := range map[string][]tartest.Entry{
		"chain":      {tartest.Symlink("a", "."), tartest.Symlink("b", "a/..")},
		"late chain": {tartest.Symlink("b", "c/.."), tartest.Symlink("c", ".")},
		"deep chain": {tartest.Dir("d"), tartest.Symlink("d/up", ".."), tartest.Symlink("d/x", "up/up/..")},
	} {
		dest := t.TempDir()
		err := extractTgz(bytes.NewReader(tartest.Tgz(t, entries...)), dest, DefaultLimits(), false)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		err = filepath.Walk(dest, func(p string, info os.FileInfo, err error) error {
			if err != nil || info.Mode()&os.ModeSymlink == 0 {
				return err
			}
			real, err := filepath.EvalSymlinks(p)
			if err != nil {
				return nil // dangling links are harmless
			}
			if !Inside(dest, real) {
				t.Errorf("%s: %s resolves to %s outside %s", name, p, real, dest)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestExtractModes(t *testing.T) {
	tgz := tartest.Tgz(t, tartest.Dir("."), tartest.Entry{Hdr: tartest.Header("run.sh", 0o755, 2), Body: "#!"}, tartest.Entry{Hdr: tartest.Header("secret", 0o600, 1), Body: "s"})
	for _, preserve := range []bool{false, true} {
		dest := t.TempDir()
		if err := extractTgz(bytes.NewReader(tgz), dest, DefaultLimits(), preserve); err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string][2]os.FileMode{"run.sh": {0o644, 0o755}, "secret": {0o644, 0o600}} {
			fi, err := os.Stat(filepath.Join(dest, name))
			if err != nil {
				t.Fatal(err)
			}
			w := want[0]
			if preserve {
				w = want[1]
			}
			if fi.Mode().Perm() != w {
				t.Errorf("preserve=%v %s mode %v, want %v", preserve, name, fi.Mode().Perm(), w)
			}
		}
	}
}

func FuzzExtract(f *testing.F) {
	f.Add(tartest.Tgz(f, tartest.Dir("."), tartest.File("a/b.yaml", "x"), tartest.Symlink("l", "a")))
	f.Add(tartest.Tgz(f, tartest.Symlink("a", "."), tartest.Symlink("b", "a/.."), tartest.File("b/x", "y")))
	f.Add(tartest.Tgz(f, tartest.File("../x", "x")))
	f.Add([]byte("not gzip"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dest := filepath.Join(t.TempDir(), "repo")
		if err := os.Mkdir(dest, 0o755); err != nil {
			t.Fatal(err)
		}
		_ = extractTgz(bytes.NewReader(data), dest, Limits{MaxCompressedBytes: 1 << 20, MaxExtractedBytes: 1 << 20, MaxFiles: 100}, true)
		// Whatever happened, nothing may exist next to dest, and every link
		// must resolve inside it.
		siblings, _ := os.ReadDir(filepath.Dir(dest))
		if len(siblings) != 1 {
			t.Fatalf("extraction wrote outside dest: %v", siblings)
		}
		_ = filepath.Walk(dest, func(p string, info os.FileInfo, err error) error {
			if err == nil && info.Mode()&os.ModeSymlink != 0 {
				if real, err := filepath.EvalSymlinks(p); err == nil && !Inside(dest, real) {
					t.Fatalf("%s resolves outside to %s", p, real)
				}
			}
			return nil
		})
	})
}

// Small files are written on other cores; a later entry of the same name must
// still replace the earlier file, and an entry below a queued file must still
// be refused as it is when the file is on disk.
func TestExtractOrderWithQueuedWrites(t *testing.T) {
	dest := t.TempDir()
	tgz := tartest.Tgz(t, tartest.Dir("."), tartest.File("a", "first"), tartest.File("b", "x"), tartest.File("a", "second"))
	if err := extractTgz(bytes.NewReader(tgz), dest, DefaultLimits(), false); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dest, "a")); string(got) != "second" {
		t.Errorf("a = %q, want the later entry's", got)
	}
	for name, entries := range map[string][]tartest.Entry{
		"dir below file":  {tartest.File("f", "x"), tartest.Dir("f/d")},
		"file below file": {tartest.File("f", "x"), tartest.File("f/g", "y")},
	} {
		err := extractTgz(bytes.NewReader(tartest.Tgz(t, entries...)), t.TempDir(), DefaultLimits(), false)
		if err == nil || !strings.Contains(err.Error(), `"f" is a file and cannot contain entries`) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
