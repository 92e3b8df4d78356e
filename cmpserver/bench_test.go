package cmpserver

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/cmpserver/unpack/tartest"
	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
)

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
	root := tartest.BenchRepo(b)
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
	b.SetBytes(tartest.BenchFiles * tartest.BenchFileSize)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		got, err := c.Generate(ctxTimeout(b, 5*time.Minute), client.Request{RepoRoot: root})
		if err != nil || len(got) != 1 || !strings.Contains(got[0], "bytes-"+strconv.Itoa(tartest.BenchFiles*tartest.BenchFileSize)) {
			b.Fatalf("%q %v", got, err)
		}
	}
	b.StopTimer()
	b.ReportMetric(servingtest.PeakRSSMiB(os.Getpid()), "peakRSS-MB")
}
