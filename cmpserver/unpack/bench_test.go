package unpack

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/cmpserver/unpack/tartest"
)

// BenchmarkExtract is the server's extraction of the same tarball alone, to
// compare with `tar xzf`, with small files written on other cores (parallel)
// and all on the extracting goroutine (inline). CMP_BENCH_DIR sets where it
// extracts (default: the test's temp dir), e.g. /dev/shm for tmpfs.
func BenchmarkExtract(b *testing.B) {
	root := tartest.BenchRepo(b)
	tgz, err := client.WriteTarball(root, "", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer tgz.Remove()
	data, err := os.ReadFile(tgz.Path)
	if err != nil {
		b.Fatal(err)
	}
	base := os.Getenv("CMP_BENCH_DIR")
	for _, mode := range []string{"parallel", "inline"} {
		b.Run(mode, func(b *testing.B) {
			if mode == "inline" {
				startWriters = func() *fileWriters { return nil }
				defer func() { startWriters = newFileWriters }()
			}
			b.SetBytes(tartest.BenchFiles * tartest.BenchFileSize)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dest, err := os.MkdirTemp(base, "extract-")
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := extractTgz(io.Reader(bytes.NewReader(data)), dest, DefaultLimits(), false); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				os.RemoveAll(dest)
				b.StartTimer()
			}
		})
	}
}

// BenchmarkTreeSealCheck is the check made after every request on a shared
// tree: the 5,000-file, 50-directory repository of the benchmarks above.
func BenchmarkTreeSealCheck(b *testing.B) {
	tgz, err := client.WriteTarball(tartest.BenchRepo(b), "", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer tgz.Remove()
	f, err := os.Open(tgz.Path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	base := b.TempDir()
	dest := filepath.Join(base, "tree")
	if err := os.Mkdir(dest, 0o755); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { MakeWritable(base) })
	if err := extractTgzWith(f, dest, extractOptions{limits: DefaultLimits(), readOnly: true}); err != nil {
		b.Fatal(err)
	}
	sl, err := sealTree(dest, base)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := sl.check(dest); err != nil {
			b.Fatal(err)
		}
	}
}
