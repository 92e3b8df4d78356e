// Package tartest crafts repository tarballs entry by entry, exactly as
// given (hostile ones included), for the tests of the receiving side and of
// the server.
package tartest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Entry is one raw entry of a crafted tarball.
type Entry struct {
	Hdr  tar.Header
	Body string
}

// File is a regular file, mode 0644.
func File(name, body string) Entry {
	return Entry{Hdr: tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}, Body: body}
}

// Dir is a directory, mode 0755.
func Dir(name string) Entry {
	return Entry{Hdr: tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755}}
}

// Symlink is a symbolic link to target.
func Symlink(name, target string) Entry {
	return Entry{Hdr: tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}}
}

// Header is a regular file's header with mode and size.
func Header(name string, mode int64, size int64) tar.Header {
	return tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode, Size: size}
}

// Tgz builds a gzip-compressed tar of entries, exactly as given.
func Tgz(t testing.TB, entries ...Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		hdr := e.Hdr
		if err := tw.WriteHeader(&hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.Body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The benchmarks' repository: BenchFiles files of BenchFileSize bytes.
const (
	BenchFiles    = 5000
	BenchFileSize = 10_000 // 5,000 × 10 kB = 50 MB
)

// BenchRepo writes the benchmarks' repository: Repo of BenchFiles files.
func BenchRepo(b *testing.B) string {
	b.Helper()
	return Repo(b, BenchFiles)
}

// Repo writes a repository of files text files of BenchFileSize bytes in 50
// directories; the text is random words, so gzip does real work.
func Repo(t testing.TB, files int) string {
	t.Helper()
	root := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("apiVersion kind metadata name namespace spec replicas image tag values chart labels app selector template containers ports env")
	for i := 0; i < files; i++ {
		dir := filepath.Join(root, "d"+strconv.Itoa(i%50))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		for buf.Len() < BenchFileSize {
			buf.WriteString(words[rng.IntN(len(words))])
			buf.WriteString(": ")
			buf.WriteString(strconv.FormatUint(rng.Uint64(), 36))
			buf.WriteByte('\n')
		}
		if err := os.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(i)+".yaml"), buf.Bytes()[:BenchFileSize], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// Tree creates files (path → content; a trailing "/" makes a dir) under a new
// temp dir and returns it: a repository to pack.
func Tree(t testing.TB, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}
