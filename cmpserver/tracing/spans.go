package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Scope is the instrumentation scope of cmp-server's own spans.
const Scope = "github.com/cmp-injector/cmp-injector/cmpserver"

// Span names. Where Argo CD's plugin server has a span for the same step, the
// name is its own, so that a query written for argocd-cmp-server finds ours.
const (
	// SpanGenerate is a GenerateManifest request's span (Argo CD's name);
	// SpanMatch and SpanParameters are the other streaming requests', which
	// Argo CD's server does not make.
	SpanGenerate   = "plugin.generateManifestGeneric"
	SpanMatch      = "plugin.matchRepository"
	SpanParameters = "plugin.getParametersAnnouncement"
	// SpanReceive is the wait for the stream's header: Argo CD's repo-server
	// sends it once it has packed the repository, so this is mostly its
	// packing. SpanUntgz is the body: transfer, checksum and unpacking,
	// which here overlap.
	SpanReceive = "cmp.ReceiveRepoStream"
	SpanUntgz   = "cmp.Untgz"
	// SpanCommand is one plugin command (init, generate, discover or
	// parameters; Argo CD's name).
	SpanCommand = "plugin.runCommand"
	// SpanSend is the response's encoding and sending.
	SpanSend = "cmp.SendResponse"
)

// Attribute keys an operator filters on. The app's come from the request's
// env as the repo-server sends it; none of them is a secret.
const (
	AttrPlugin     = attribute.Key("cmp.plugin")
	AttrConfigHash = attribute.Key("cmp.config_hash")
	AttrRequestID  = attribute.Key("cmp.request_id")
	AttrApp        = attribute.Key("argocd.app.name")
	AttrAppNS      = attribute.Key("argocd.app.namespace")
	AttrProject    = attribute.Key("argocd.app.project")
	AttrAppPath    = attribute.Key("argocd.app.path")
	// AttrBytes is the compressed bytes received; AttrFiles the entries
	// unpacked (0 on a shared tree found ready: AttrSharedTree).
	AttrBytes      = attribute.Key("cmp.repo.compressed_bytes")
	AttrFiles      = attribute.Key("cmp.repo.files")
	AttrSharedTree = attribute.Key("cmp.repo.shared_tree_reused")
	// AttrNamesOnly: the tree was unpacked as empty files (a discovery
	// rule by file name or glob reads no content).
	AttrNamesOnly = attribute.Key("cmp.repo.names_only")
	// AttrMatchSettled: the discovery rule matched before the tarball's
	// end, and the rest was verified but not unpacked (unpack.Repo.Settled).
	AttrMatchSettled = attribute.Key("cmp.repo.match_settled")
	// AttrRenderCacheHit: the answer came from the render cache; the
	// stream was only verified.
	AttrRenderCacheHit = attribute.Key("cmp.render_cache.hit")
	// AttrCommand is the program (Argo CD's attribute: the first word of the
	// command, never its arguments, which may carry values of secrets).
	AttrCommand  = attribute.Key("command")
	AttrPhase    = attribute.Key("cmp.command.phase")
	AttrExitCode = attribute.Key("process.exit.code")
	AttrExit     = attribute.Key("cmp.command.exit") // the code, or signal_N, or start_error
	AttrStopped  = attribute.Key("cmp.command.stopped")
	AttrStdout   = attribute.Key("cmp.command.stdout_bytes")
	// AttrManifests and AttrResponseBytes describe a GenerateManifest answer.
	AttrManifests     = attribute.Key("cmp.response.manifests")
	AttrResponseBytes = attribute.Key("cmp.response.bytes")
)

// Span is a span Begin started; nil when none was, and then every method
// does nothing. Callers that compute attributes check Recording first: the
// attributes of a call on nil are still built.
type Span struct{ s trace.Span }

// Begin starts a child of ctx's span from the same provider. With no
// recording span in ctx (tracing off, or a trace the repo-server did not
// sample) it makes nothing and returns ctx as it is and a nil Span: a
// request then pays one interface call per phase.
func Begin(ctx context.Context, name string) (context.Context, *Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, nil
	}
	ctx, s := parent.TracerProvider().Tracer(Scope).Start(ctx, name)
	return ctx, &Span{s}
}

// Recording says whether s records what it is given.
func (s *Span) Recording() bool { return s != nil }

// Set adds attributes to s.
func (s *Span) Set(attrs ...attribute.KeyValue) {
	if s != nil {
		s.s.SetAttributes(attrs...)
	}
}

// End ends s with err, which must be what the client is told (redacted), as
// its status.
func (s *Span) End(err error) {
	if s == nil {
		return
	}
	if err != nil {
		s.s.SetStatus(codes.Error, err.Error())
	}
	s.s.End()
}
