package unpack

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestTreeCacheBounds: unused trees beyond maxTrees go, least recently used
// first; trees in use stay.
func TestTreeCacheBounds(t *testing.T) {
	t.Parallel()
	tr := NewTrees()
	base := t.TempDir()
	var held []*tree
	for i := range maxTrees + 2 {
		dir, err := os.MkdirTemp(base, "tree-")
		if err != nil {
			t.Fatal(err)
		}
		x, ok := tr.add(TreeKey{Checksum: string(rune('a' + i))}, dir, treeSeal{}, nil)
		if !ok {
			t.Fatal("add refused a new key")
		}
		held = append(held, x)
	}
	if _, ok := tr.add(TreeKey{Checksum: "a"}, base, treeSeal{}, nil); ok {
		t.Error("a second tree for one key was accepted")
	}
	if len(tr.m) != maxTrees+2 {
		t.Fatalf("%d trees, want all %d while in use", len(tr.m), maxTrees+2)
	}
	for _, x := range held {
		tr.release(x)
	}
	if len(tr.m) != maxTrees {
		t.Fatalf("%d trees after release, want %d", len(tr.m), maxTrees)
	}
	if _, err := os.Stat(held[0].dir); !os.IsNotExist(err) {
		t.Errorf("the least recently used tree is still on disk: %v", err)
	}
	if tr.acquire(TreeKey{Checksum: "a"}) != nil || tr.acquire(TreeKey{Checksum: "f"}) == nil {
		t.Error("wrong trees evicted")
	}
}

// TestTreeSealSeesEveryChange: whatever the tree's owner does to an entry,
// even restoring its mode, size and mtime afterwards, the seal no longer
// matches; reading the tree leaves it matching.
func TestTreeSealSeesEveryChange(t *testing.T) {
	t.Parallel()
	changes := map[string]func(root string) error{
		"read only": func(root string) error {
			_, err := os.ReadFile(root + "/d/f")
			return err
		},
		"chmod and back": func(root string) error {
			if err := os.Chmod(root+"/d/f", 0o644); err != nil {
				return err
			}
			return os.Chmod(root+"/d/f", 0o444)
		},
		"same-size rewrite, mode and mtime restored": func(root string) error {
			fi, err := os.Stat(root + "/d/f")
			if err != nil {
				return err
			}
			if err := os.Chmod(root+"/d/f", 0o644); err != nil {
				return err
			}
			if err := os.WriteFile(root+"/d/f", []byte("EVIL"), 0o644); err != nil {
				return err
			}
			if err := os.Chmod(root+"/d/f", 0o444); err != nil {
				return err
			}
			return os.Chtimes(root+"/d/f", fi.ModTime(), fi.ModTime())
		},
		"new file": func(root string) error {
			if err := os.Chmod(root+"/d", 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(root+"/d/g", nil, 0o444); err != nil {
				return err
			}
			return os.Chmod(root+"/d", 0o555)
		},
		"hard link elsewhere": func(root string) error {
			return os.Link(root+"/d/f", filepath.Dir(root)+"/"+filepath.Base(root)+"-link")
		},
		"tree replaced by a copy": func(root string) error {
			if err := os.Rename(root, root+"-moved"); err != nil {
				return err
			}
			return exec.Command("cp", "-a", root+"-moved", root).Run()
		},
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			base := t.TempDir()
			root := base + "/tree"
			if err := os.MkdirAll(root+"/d", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(root+"/d/f", []byte("good"), 0o444); err != nil {
				t.Fatal(err)
			}
			for _, d := range []string{root + "/d", root} {
				if err := os.Chmod(d, 0o555); err != nil {
					t.Fatal(err)
				}
			}
			t.Cleanup(func() { MakeWritable(base) })
			sl, err := sealTree(root, base)
			if err != nil {
				t.Fatal(err)
			}
			if err := sl.check(root); err != nil {
				t.Fatalf("freshly sealed: %v", err)
			}
			if err := change(root); err != nil {
				t.Fatal(err)
			}
			err = sl.check(root)
			if name == "read only" {
				if err != nil {
					t.Errorf("after reading: %v", err)
				}
			} else if err == nil {
				t.Error("the change went unnoticed")
			}
		})
	}
}
