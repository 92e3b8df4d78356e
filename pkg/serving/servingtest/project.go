package servingtest

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The kubelet's names in a projected volume (pkg/volume/util/atomic_writer.go).
const (
	dataDirName    = "..data"
	newDataDirName = "..data_tmp"
)

// WriteProjected writes files (path relative to dir → content) into dir the
// way the kubelet projects configMap, secret and downwardAPI volumes: the
// content goes into a new hidden timestamped directory, the "..data" symlink is
// switched to it by one rename, each visible path is a symlink through
// "..data", and the previous timestamped directory is removed. A reader sees
// the old or the new set of files, never a mix; a watch on the file itself
// sees nothing, because the file it resolved to is never written again.
// Paths that are no longer in files disappear, as they do on a node.
func WriteProjected(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	oldTS, _ := os.Readlink(filepath.Join(dir, dataDirName))
	tsDir, err := os.MkdirTemp(dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return err
	}
	for p, data := range files {
		full := filepath.Join(tsDir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			return err
		}
	}
	tmpLink := filepath.Join(dir, newDataDirName)
	_ = os.Remove(tmpLink)
	if err := os.Symlink(filepath.Base(tsDir), tmpLink); err != nil {
		return err
	}
	if err := os.Rename(tmpLink, filepath.Join(dir, dataDirName)); err != nil {
		return err
	}
	// Visible names: the first path element, linked through ..data.
	want := map[string]bool{}
	for p := range files {
		top := strings.SplitN(filepath.ToSlash(p), "/", 2)[0]
		want[top] = true
		link := filepath.Join(dir, top)
		if _, err := os.Lstat(link); errors.Is(err, fs.ErrNotExist) {
			if err := os.Symlink(filepath.Join(dataDirName, top), link); err != nil {
				return err
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "..") && !want[e.Name()] && e.Type()&fs.ModeSymlink != 0 {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	if oldTS != "" && oldTS != filepath.Base(tsDir) {
		return os.RemoveAll(filepath.Join(dir, oldTS))
	}
	return nil
}
