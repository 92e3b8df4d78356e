package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
)

// The floor must do a server's whole unpack, or its CPU is no floor: every
// file, directory, mode and symlink of the tarball Argo CD's client sends.
func TestUnpackFloorWritesTheTree(t *testing.T) {
	src := t.TempDir()
	for name, body := range map[string]string{"a/b/c.yaml": "kind: ConfigMap\n", "run.sh": "#!/bin/sh\n", "top.txt": ""} {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(src, "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a/b/c.yaml", filepath.Join(src, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	tgz, err := client.WriteTarball(src, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "tree")
	if err := unpackTree(tgz.Path, dst); err != nil {
		t.Fatal(err)
	}
	if got, want := describe(t, dst), describe(t, src); got != want {
		t.Errorf("unpacked tree:\n%s\nwant:\n%s", got, want)
	}
	again := filepath.Join(t.TempDir(), "again")
	if err := unpackMain([]string{"--tarball", tgz.Path, "--dir", again}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(again); !os.IsNotExist(err) {
		t.Errorf("unpack left %s behind: %v", again, err)
	}
}

// describe lists a tree: path, type, permissions, content or link target.
func describe(t *testing.T, root string) string {
	t.Helper()
	var out string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		out += rel + " " + info.Mode().String()
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out += " -> " + target
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out += " " + string(b)
		}
		out += "\n"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
