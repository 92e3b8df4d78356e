package cmpserver

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/cmpserver/tracing"
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

// BenchmarkGenerateSmallRepo is a one-file repository and a one-line
// generate: the request's fixed costs, where the cost of tracing shows if
// anywhere. untraced is the server with no --otlp-address (no stats handler,
// no span); traced records every phase into an exporter that keeps nothing.
func BenchmarkGenerateSmallRepo(b *testing.B) {
	b.Run("untraced", func(b *testing.B) { benchSmall(b, nil) })
	b.Run("traced", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		benchSmall(b, &tracing.Tracer{Provider: tp, Propagator: propagation.TraceContext{}})
	})
}

func benchSmall(b *testing.B, tr *tracing.Tracer) {
	root := writeTree(b, map[string]string{"app.yaml": "a: b\n"})
	ts := startServer(b, "kind: ConfigManagementPlugin\nmetadata: {name: small}\nspec:\n  generate:\n    command: [sh, -c, 'cat app.yaml']\n",
		func(o *Options) { o.Tracer = tr })
	c := ts.dial(b)
	ctx := context.Background()
	if tr != nil {
		// A request in a sampled trace, as the repo-server sends it.
		var span interface{ End(...trace.SpanEndOption) }
		ctx, span = sdktrace.NewTracerProvider().Tracer("repo-server").Start(ctx, "reposerver.GenerateManifest")
		defer span.End()
		carrier := propagation.MapCarrier{}
		propagation.TraceContext{}.Inject(ctx, carrier)
		ctx = metadata.AppendToOutgoingContext(ctx, "traceparent", carrier["traceparent"])
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if got, err := c.Generate(ctx, client.Request{RepoRoot: root}); err != nil || len(got) != 1 {
			b.Fatalf("%q %v", got, err)
		}
	}
}
