package client

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Tarball is a repository packed the way Argo CD's repo-server packs it.
type Tarball struct {
	Path     string // temp file holding the .tar.gz
	Checksum string // lowercase hex SHA-256 of the file
	Size     int64
	Files    int // regular files written
}

// Remove deletes the temp file.
func (t *Tarball) Remove() error { return os.Remove(t.Path) }

// WriteTarball packs root into a temp .tar.gz in tmpDir ("" = os.TempDir()): a
// lexical walk, relative names without "./", a "." directory entry first, only
// directories, regular files and symlinks (targets verbatim), gzip at default
// compression with an empty header. Paths matching an exclude pattern
// (filepath.Match against the relative path) are skipped, directories with their
// contents. Like Argo CD it refuses a tree without regular files.
func WriteTarball(root, tmpDir string, exclude []string) (*Tarball, error) {
	f, err := os.CreateTemp(tmpDir, "cmp-repo-*.tgz")
	if err != nil {
		return nil, err
	}
	t := &Tarball{Path: f.Name()}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(t.Path)
		}
	}()
	hash := sha256.New()
	counter := &countingWriter{w: io.MultiWriter(f, hash)}
	gz := gzip.NewWriter(counter)
	tw := tar.NewWriter(gz)
	err = filepath.Walk(root, func(path string, info fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		for _, pattern := range exclude {
			if m, _ := filepath.Match(pattern, rel); m {
				if info.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		return addEntry(tw, path, filepath.ToSlash(rel), info, &t.Files)
	})
	if err != nil {
		return nil, fmt.Errorf("error packing %s: %w", root, err)
	}
	if t.Files == 0 {
		return nil, fmt.Errorf("no files to send(%s)", root)
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	t.Checksum = hex.EncodeToString(hash.Sum(nil))
	t.Size = counter.n
	ok = true
	return t, nil
}

func addEntry(tw *tar.Writer, path, name string, info fs.FileInfo, files *int) error {
	link := ""
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(path)
		if err != nil {
			return err
		}
		link = target
	case info.Mode().IsRegular(), info.IsDir():
	default:
		return nil // fifo, device, socket: skipped like Argo CD
	}
	hdr, err := tar.FileInfoHeader(info, link)
	if err != nil {
		return err
	}
	hdr.Name = name
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return nil
	}
	*files++
	src, err := os.Open(path)
	if err != nil {
		return err
	}
	defer src.Close()
	_, err = io.Copy(tw, src)
	return err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
