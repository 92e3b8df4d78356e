package cmpserver

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/cmpserver/tracing"
)

// A request that arrives in a trace (the W3C traceparent Argo CD's
// repo-server sends through otelgrpc) continues it: the RPC's span is a child
// of the repo-server's, and each phase a child of the request's span.

const tracedPlugin = `kind: ConfigManagementPlugin
metadata: {name: traced}
spec:
  init:
    command: [sh, -c, 'true']
  generate:
    command: [sh, -c, 'echo "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}"']
`

// traced starts a server exporting to an in-memory exporter.
func traced(t *testing.T, plugin string, mutate func(*Options)) (*testServer, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ts := startServer(t, plugin, func(o *Options) {
		o.Tracer = &tracing.Tracer{Provider: tp, Propagator: propagation.TraceContext{}}
		if mutate != nil {
			mutate(o)
		}
	})
	return ts, exp
}

// inRepoServerTrace is ctx inside a span of the caller, with its traceparent
// in the outgoing metadata, as otelgrpc's client handler sends it.
func inRepoServerTrace(t *testing.T) (context.Context, trace.SpanContext) {
	ctx, span := sdktrace.NewTracerProvider().Tracer("repo-server").Start(ctxTimeout(t, 30*time.Second), "reposerver.GenerateManifest")
	t.Cleanup(func() { span.End() })
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	return metadata.AppendToOutgoingContext(ctx, "traceparent", carrier["traceparent"]), span.SpanContext()
}

// spansOf waits for the RPC's server span, which ends after the response is
// sent, and returns the spans by name.
func spansOf(t *testing.T, exp *tracetest.InMemoryExporter, rpcSpan string) map[string][]tracetest.SpanStub {
	t.Helper()
	byName := map[string][]tracetest.SpanStub{}
	if !waitUntil(10*time.Second, func() bool {
		clear(byName)
		for _, s := range exp.GetSpans() {
			byName[s.Name] = append(byName[s.Name], s)
		}
		return len(byName[rpcSpan]) > 0
	}) {
		t.Fatalf("no span %q within 10s; spans: %v", rpcSpan, byName)
	}
	return byName
}

func attr(s tracetest.SpanStub, k attribute.Key) (attribute.Value, bool) {
	for _, a := range s.Attributes {
		if a.Key == k {
			return a.Value, true
		}
	}
	return attribute.Value{}, false
}

func TestTraceContinuesTheRepoServers(t *testing.T) {
	t.Parallel()
	ts, exp := traced(t, tracedPlugin, nil)
	ctx, parent := inRepoServerTrace(t)
	env, err := client.App{Name: "guestbook", Namespace: "apps", Project: "team-a"}.Environ()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ts.dial(t).Generate(ctx, client.Request{RepoRoot: writeTree(t, map[string]string{"app/a.yaml": "a: b\n", "app/b.yaml": "c: d\n"}),
		AppRelPath: "app", Env: env})
	if err != nil || len(got) != 1 {
		t.Fatalf("%q %v", got, err)
	}
	spans := spansOf(t, exp, "plugin.ConfigManagementPluginService/GenerateManifest")
	one := func(name string) tracetest.SpanStub {
		t.Helper()
		if len(spans[name]) != 1 {
			t.Fatalf("%d spans %q, want 1; spans: %v", len(spans[name]), name, spans)
		}
		return spans[name][0]
	}
	rpc := one("plugin.ConfigManagementPluginService/GenerateManifest")
	if rpc.Parent.SpanID() != parent.SpanID() || !rpc.Parent.IsRemote() {
		t.Errorf("the RPC's span has parent %v, want the repo-server's span %v", rpc.Parent.SpanID(), parent.SpanID())
	}
	req := one(tracing.SpanGenerate)
	if req.Parent.SpanID() != rpc.SpanContext.SpanID() {
		t.Errorf("%s is not a child of the RPC's span", tracing.SpanGenerate)
	}
	for k, want := range map[attribute.Key]string{tracing.AttrPlugin: "traced", tracing.AttrApp: "guestbook",
		tracing.AttrAppNS: "apps", tracing.AttrProject: "team-a", tracing.AttrAppPath: "app"} {
		if v, _ := attr(req, k); v.AsString() != want {
			t.Errorf("%s %s = %q, want %q", tracing.SpanGenerate, k, v.AsString(), want)
		}
	}
	for _, name := range []string{tracing.SpanReceive, tracing.SpanUntgz, tracing.SpanSend} {
		if s := one(name); s.Parent.SpanID() != req.SpanContext.SpanID() {
			t.Errorf("%s is not a child of %s", name, tracing.SpanGenerate)
		}
	}
	untgz := one(tracing.SpanUntgz)
	if v, _ := attr(untgz, tracing.AttrFiles); v.AsInt64() < 2 {
		t.Errorf("%s files = %d, want the tarball's entries (at least 2)", tracing.SpanUntgz, v.AsInt64())
	}
	if v, _ := attr(untgz, tracing.AttrBytes); v.AsInt64() <= 0 {
		t.Errorf("%s bytes = %d", tracing.SpanUntgz, v.AsInt64())
	}
	if v, _ := attr(one(tracing.SpanSend), tracing.AttrManifests); v.AsInt64() != 1 {
		t.Errorf("%s manifests = %d, want 1", tracing.SpanSend, v.AsInt64())
	}
	var phases []string
	for _, s := range spans[tracing.SpanCommand] {
		phase, _ := attr(s, tracing.AttrPhase)
		code, ok := attr(s, tracing.AttrExitCode)
		cmd, _ := attr(s, tracing.AttrCommand)
		if !ok || code.AsInt64() != 0 || cmd.AsString() != "sh" || s.Parent.SpanID() != req.SpanContext.SpanID() {
			t.Errorf("command span %s: exit %v, command %q, parent %v", phase.AsString(), code.AsInt64(), cmd.AsString(), s.Parent.SpanID())
		}
		phases = append(phases, phase.AsString())
	}
	if strings.Join(phases, ",") != "init,generate" {
		t.Errorf("command spans %v, want init then generate", phases)
	}
	for _, s := range exp.GetSpans() {
		if s.SpanContext.TraceID() != parent.TraceID() {
			t.Errorf("span %s is in trace %s, not the repo-server's %s", s.Name, s.SpanContext.TraceID(), parent.TraceID())
		}
	}
}

// A failed command's span and the request's carry the error the client is
// told, with the sidecar's Secret values redacted, and no attribute holds one.
func TestTracedErrorsAreRedacted(t *testing.T) {
	t.Parallel()
	ts, exp := traced(t, leakyPlugin(`echo "token is $`+tokenVar+`" >&2; exit 3`), func(o *Options) { o.Env = secretEnv() })
	ctx, _ := inRepoServerTrace(t)
	if _, err := ts.dial(t).Generate(ctx, client.Request{RepoRoot: writeTree(t, map[string]string{"app.yaml": "a: b\n"}), Env: []string{"ARGOCD_ENV_X=" + plantedToken}}); err == nil {
		t.Fatal("the command failed, the request did not")
	}
	spansOf(t, exp, "plugin.ConfigManagementPluginService/GenerateManifest")
	failed := 0
	for _, s := range exp.GetSpans() {
		if s.Status.Code == codes.Error {
			failed++
			if !strings.Contains(s.Status.Description, tokenTag) {
				t.Errorf("span %s: status %q does not name the redacted value, so the test proves nothing", s.Name, s.Status.Description)
			}
		}
		text := s.Status.Description
		for _, a := range s.Attributes {
			text += " " + a.Value.String()
		}
		for _, e := range s.Events {
			text += " " + e.Name
			for _, a := range e.Attributes {
				text += " " + a.Value.String()
			}
		}
		if strings.Contains(text, plantedToken) {
			t.Errorf("span %s carries the Secret value: %s", s.Name, text)
		}
	}
	// The command's, the request's and the RPC's.
	if failed < 3 {
		t.Errorf("%d spans have an error status, want the command's, the request's and the RPC's", failed)
	}
}

// The kubelet's probe calls CheckPluginConfiguration every few seconds: no
// trace of it.
func TestProbeIsNotTraced(t *testing.T) {
	t.Parallel()
	ts, exp := traced(t, tracedPlugin, nil)
	c := ts.dial(t)
	if _, err := c.Check(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	// A traced request after it: its span is there, the probe's is not.
	ctx, _ := inRepoServerTrace(t)
	if _, err := c.Generate(ctx, client.Request{RepoRoot: writeTree(t, map[string]string{"a.yaml": "a: b\n"})}); err != nil {
		t.Fatal(err)
	}
	spans := spansOf(t, exp, "plugin.ConfigManagementPluginService/GenerateManifest")
	if n := len(spans["plugin.ConfigManagementPluginService/CheckPluginConfiguration"]); n != 0 {
		t.Errorf("%d spans of CheckPluginConfiguration", n)
	}
}

// With tracing off nothing is installed and a phase makes no span.
func TestNoTracerNoSpans(t *testing.T) {
	t.Parallel()
	if opts := traceOptions(nil); len(opts) != 0 {
		t.Errorf("%d server options without a tracer", len(opts))
	}
	ctx := context.Background()
	if got, span := tracing.Begin(ctx, tracing.SpanCommand); got != ctx || span.Recording() {
		t.Error("Begin without a recording parent made a span")
	}
}

// TestDiscoveryByNameUnpacksNoContent: a MatchRepository whose rule reads
// names only (fileName, find.glob) unpacks the stream as empty files, which
// its Untgz span says, and stops unpacking once the rule matches the tree so
// far (the app's files come before docs/ in the stream), counted by
// cmp_server_match_settled_total; a find.command rule, which may read
// content, and a readOnlyRepository plugin, whose shared tree serves its
// generations too, get the whole tree.
func TestDiscoveryByNameUnpacksNoContent(t *testing.T) {
	t.Parallel()
	base := "kind: ConfigManagementPlugin\nmetadata: {name: disc}\nspec:\n  generate: {command: [\"true\"]}\n"
	root := writeTree(t, map[string]string{"app/kustomization.yaml": "resources: []\n", "docs/a.md": "a", "docs/b.md": "b"})
	for _, tc := range []struct {
		name, spec string
		namesOnly  bool
	}{
		{"fileName", "  discover: {fileName: ./kustomization.yaml}\n", true},
		{"find.glob", "  discover: {find: {glob: \"**/kustomization.yaml\"}}\n", true},
		{"find.command", "  discover: {find: {command: [sh, -c, \"grep -l resources kustomization.yaml\"]}}\n", false},
		{"readOnlyRepository", "  readOnlyRepository: true\n  discover: {fileName: ./kustomization.yaml}\n", false},
	} {
		ts, exp := traced(t, base+tc.spec, nil)
		ctx, _ := inRepoServerTrace(t)
		m, err := ts.dial(t).Match(ctx, client.Request{RepoRoot: root, AppRelPath: "app"})
		if err != nil || !m.Supported {
			t.Fatalf("%s: %+v %v", tc.name, m, err)
		}
		spans := spansOf(t, exp, "plugin.ConfigManagementPluginService/MatchRepository")
		if len(spans[tracing.SpanUntgz]) != 1 {
			t.Fatalf("%s: %d untgz spans", tc.name, len(spans[tracing.SpanUntgz]))
		}
		untgz := spans[tracing.SpanUntgz][0]
		v, _ := attr(untgz, tracing.AttrNamesOnly)
		if v.AsBool() != tc.namesOnly {
			t.Errorf("%s: names only %v, want %v", tc.name, v.AsBool(), tc.namesOnly)
		}
		settled, _ := attr(untgz, tracing.AttrMatchSettled)
		files, _ := attr(untgz, tracing.AttrFiles)
		n := metricValue(t, ts.srv.metricSet(), "cmp_server_match_settled_total")
		if settled.AsBool() != tc.namesOnly || (n == 1) != tc.namesOnly {
			t.Errorf("%s: settled %v, cmp_server_match_settled_total %v; want settled %v", tc.name, settled.AsBool(), n, tc.namesOnly)
		}
		if tc.namesOnly && files.AsInt64() >= 5 {
			t.Errorf("%s: %d entries unpacked, want app/ and its file, not docs/", tc.name, files.AsInt64())
		}
	}
}
