package cmpserver

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
)

const (
	benchFiles    = 5000
	benchFileSize = 10_000 // 5,000 × 10 kB = 50 MB
)

// benchRepo writes a repository of benchFiles text files in 50 directories;
// the text is random words, so gzip does real work.
func benchRepo(b *testing.B) string {
	b.Helper()
	root := b.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("apiVersion kind metadata name namespace spec replicas image tag values chart labels app selector template containers ports env")
	for i := 0; i < benchFiles; i++ {
		dir := filepath.Join(root, "d"+strconv.Itoa(i%50))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		var buf bytes.Buffer
		for buf.Len() < benchFileSize {
			buf.WriteString(words[rng.IntN(len(words))])
			buf.WriteString(": ")
			buf.WriteString(strconv.FormatUint(rng.Uint64(), 36))
			buf.WriteByte('\n')
		}
		if err := os.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(i)+".yaml"), buf.Bytes()[:benchFileSize], 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return root
}

// BenchmarkGenerateLargeRepo streams a 5,000-file, 50 MB repository through the
// socket, as the repo-server would (tarball built per call, 1 KiB chunks), to a
// generate that reads every file and prints one manifest. Set CMP_BENCH_KEEP_TGZ
// to a path to keep the tarball for a `time tar xzf` comparison.
func BenchmarkGenerateLargeRepo(b *testing.B) {
	benchGenerate(b, "")
}

// BenchmarkGenerateSharedTree is BenchmarkGenerateLargeRepo with
// readOnlyRepository: every request after the first reuses the tree (and has
// its seal checked, seal.go) instead of unpacking it.
func BenchmarkGenerateSharedTree(b *testing.B) {
	benchGenerate(b, "\n  readOnlyRepository: true")
}

func benchGenerate(b *testing.B, extra string) {
	root := benchRepo(b)
	plugin := `kind: ConfigManagementPlugin
metadata: {name: bench}
spec:` + extra + `
  generate:
    command: [sh, -c, 'n=$(find . -type f -exec cat {} + | wc -c); echo "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"bytes-$n\"}}"']
`
	ts := startServer(b, plugin, nil)
	c := ts.dial(b)
	if keep := os.Getenv("CMP_BENCH_KEEP_TGZ"); keep != "" {
		tgz, err := client.WriteTarball(root, "", nil)
		if err != nil {
			b.Fatal(err)
		}
		data, _ := os.ReadFile(tgz.Path)
		_ = os.WriteFile(keep, data, 0o644)
		tgz.Remove()
		b.Logf("tarball: %d bytes compressed", len(data))
	}
	b.SetBytes(benchFiles * benchFileSize)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		got, err := c.Generate(ctxTimeout(b, 5*time.Minute), client.Request{RepoRoot: root})
		if err != nil || len(got) != 1 || !strings.Contains(got[0], "bytes-"+strconv.Itoa(benchFiles*benchFileSize)) {
			b.Fatalf("%q %v", got, err)
		}
	}
	b.StopTimer()
	b.ReportMetric(servingtest.PeakRSSMiB(os.Getpid()), "peakRSS-MB")
}

// BenchmarkExtract is the server's extraction of the same tarball alone, to
// compare with `tar xzf`, with small files written on other cores (parallel)
// and all on the extracting goroutine (inline). CMP_BENCH_DIR sets where it
// extracts (default: the test's temp dir), e.g. /dev/shm for tmpfs.
func BenchmarkExtract(b *testing.B) {
	root := benchRepo(b)
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
			b.SetBytes(benchFiles * benchFileSize)
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
	tgz, err := client.WriteTarball(benchRepo(b), "", nil)
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
	b.Cleanup(func() { makeWritable(base) })
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
