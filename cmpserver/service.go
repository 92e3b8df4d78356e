package cmpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/cmp-injector/cmp-injector/cmpserver/command"
	"github.com/cmp-injector/cmp-injector/cmpserver/engine"
	"github.com/cmp-injector/cmp-injector/cmpserver/pluginpb"
	"github.com/cmp-injector/cmp-injector/cmpserver/redact"
	"github.com/cmp-injector/cmp-injector/cmpserver/rendercache"
	"github.com/cmp-injector/cmp-injector/cmpserver/request"
	"github.com/cmp-injector/cmp-injector/cmpserver/tracing"
	"github.com/cmp-injector/cmp-injector/cmpserver/unpack"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// service implements plugin.ConfigManagementPluginService. Errors are plain Go
// errors, which gRPC sends as code Unknown with the message, as Argo CD does.
type service struct {
	pluginpb.UnimplementedConfigManagementPluginServiceServer
	r *requestRunner
}

// requestRunner is what the service runs a request with, the server's.
type requestRunner struct {
	configs *configs
	log     *zap.Logger
	limits  unpack.Limits
	idle    time.Duration // --stream-idle-timeout
	// streams holds one token per streaming request in flight (nil: no cap).
	streams chan struct{}
	// trees are the shared trees of read-only plugins.
	trees *unpack.Trees
	// removals remove request dirs after their responses (cleanup.go).
	removals *removals
	metrics  *metrics
	// redact words a traced request's error as the client is told it.
	redact *redact.Redactor
}

func (svc *service) CheckPluginConfiguration(context.Context, *emptypb.Empty) (*pluginpb.CheckPluginConfigurationResponse, error) {
	p := svc.r.configs.get().plugin
	return &pluginpb.CheckPluginConfigurationResponse{
		IsDiscoveryConfigured: p.DiscoveryConfigured(),
		ProvideGitCreds:       p.Spec.ProvideGitCreds,
	}, nil
}

func (svc *service) GenerateManifest(stream pluginpb.ConfigManagementPluginService_GenerateManifestServer) error {
	// The response is built in wire form as the output is split (see codec.go);
	// SendMsg is what SendAndClose calls with a *ManifestResponse.
	cfg := svc.r.configs.get()
	var cache answers[*encodedManifests]
	if cfg.cache != nil {
		cache = &requestCache{cache: cfg.cache}
	}
	return withRepo(svc.r, stream, "GenerateManifest", true, cfg, cache, func(ctx context.Context, ws *engine.Workspace) (*encodedManifests, error) {
		m := &encodedManifests{}
		if err := cfg.engine.Generate(ctx, ws, m); err != nil {
			return nil, fmt.Errorf("error generating manifests: %w", err)
		}
		return m, nil
	}, func(m *encodedManifests) error { return stream.SendMsg(m) })
}

// answers is a request's use of a render cache: an answer looked up by the
// header, and an answer kept once the request has succeeded.
type answers[T any] interface {
	lookup(*pluginpb.ManifestRequestMetadata) (T, bool)
	keep(T)
}

// requestCache is one GenerateManifest's answers: its configuration's render
// cache, and the key made from the header (lookup) for the answer (keep).
type requestCache struct {
	cache *rendercache.Cache[*encodedManifests]
	key   rendercache.Key
	keyed bool
}

// lookup is the cached answer for meta's key, if any.
func (rc *requestCache) lookup(meta *pluginpb.ManifestRequestMetadata) (*encodedManifests, bool) {
	rc.key, rc.keyed = rc.cache.KeyOf(meta)
	if !rc.keyed {
		return nil, false
	}
	return rc.cache.Get(rc.key)
}

// keep caches m, compacted, under the request's key.
func (rc *requestCache) keep(m *encodedManifests) {
	if rc.keyed {
		c := m.compact()
		rc.cache.Put(rc.key, c, int64(cap(c.chunks[0])))
	}
}

func (svc *service) MatchRepository(stream pluginpb.ConfigManagementPluginService_MatchRepositoryServer) error {
	cfg := svc.r.configs.get()
	configured := cfg.plugin.DiscoveryConfigured()
	// Without discovery the stream is still read to the end (v2.10-2.12 clients
	// send it even to named plugins and fail if it is cut short), but not unpacked.
	return withRepo[bool](svc.r, stream, "MatchRepository", configured, cfg, nil, func(ctx context.Context, ws *engine.Workspace) (bool, error) {
		ok, err := cfg.engine.Match(ctx, ws)
		if err != nil {
			return false, fmt.Errorf("match repository error: %w", err)
		}
		return ok, nil
	}, func(supported bool) error {
		return stream.SendAndClose(&pluginpb.RepositoryResponse{IsSupported: supported, IsDiscoveryEnabled: configured})
	})
}

func (svc *service) GetParametersAnnouncement(stream pluginpb.ConfigManagementPluginService_GetParametersAnnouncementServer) error {
	cfg := svc.r.configs.get()
	return withRepo[*pluginpb.ParametersAnnouncementResponse](svc.r, stream, "GetParametersAnnouncement", true, cfg, nil, func(ctx context.Context, ws *engine.Workspace) (*pluginpb.ParametersAnnouncementResponse, error) {
		as, err := cfg.engine.Parameters(ctx, ws)
		if err != nil {
			return nil, fmt.Errorf("get parameters announcement error: %w", err)
		}
		return &pluginpb.ParametersAnnouncementResponse{ParameterAnnouncements: pluginpb.FromAnnouncements(as)}, nil
	}, stream.SendAndClose)
}

// withRepo runs one request (package request) and sends fn's answer: the
// repository received and unpacked, fn run on it, the dir removed, the answer
// sent. The request runs on cfg, the configuration current when it started,
// to its end. Logs carry a request id and the configuration's hash, never env
// values. cache, when set, may answer from the header alone (the render
// cache); the answer is sent only once the stream has been verified.
func withRepo[T any](s *requestRunner, stream unpack.Stream, rpc string, extract bool, cfg *loaded, cache answers[T], fn func(context.Context, *engine.Workspace) (T, error), send func(T) error) error {
	id := newRequestID()
	ctx, span := tracing.Begin(stream.Context(), requestSpan(rpc))
	if span.Recording() {
		span.Set(tracing.AttrPlugin.String(cfg.plugin.Metadata.Name), tracing.AttrConfigHash.String(cfg.hash), tracing.AttrRequestID.String(id))
	}
	out, err := runRequest(ctx, s, stream, id, rpc, extract, cfg, span, cache, fn)
	if err == nil {
		_, sending := tracing.Begin(ctx, tracing.SpanSend)
		if sending.Recording() {
			if d, ok := any(out).(interface{ traceAttributes() []attribute.KeyValue }); ok {
				sending.Set(d.traceAttributes()...)
			}
		}
		err = send(out)
		sending.End(err)
	}
	if span.Recording() {
		span.End(s.redact.Error(err))
	}
	return err
}

// requestSpan names a request's span by its RPC (tracing.SpanGenerate ...).
func requestSpan(rpc string) string {
	switch rpc {
	case "GenerateManifest":
		return tracing.SpanGenerate
	case "MatchRepository":
		return tracing.SpanMatch
	}
	return tracing.SpanParameters
}

// runRequest is withRepo's request, its span begun.
func runRequest[T any](ctx context.Context, s *requestRunner, stream unpack.Stream, id, rpc string, extract bool, cfg *loaded, span *tracing.Span, cache answers[T], fn func(context.Context, *engine.Workspace) (T, error)) (T, error) {
	var zero T
	log := s.log.With(zap.String("request_id", id), zap.String("rpc", rpc), zap.String("config_hash", cfg.hash))
	if d, ok := ctx.Deadline(); ok {
		log = log.With(zap.Duration("deadline_in", time.Until(d).Round(time.Millisecond)))
	} else {
		log.Info("request has no deadline; only the command timeout applies")
	}
	if s.streams != nil {
		// Fail fast rather than queue: a queue would hold the caller's connection
		// and deadline while the slots are taken, possibly by hung clients, and
		// the repo-server reports the error and retries on its next refresh.
		select {
		case s.streams <- struct{}{}:
			defer func() { <-s.streams }()
		default:
			log.Warn("too many concurrent streams", zap.Int("limit", cap(s.streams)))
			return zero, status.Errorf(codes.ResourceExhausted, "too many concurrent requests: %d are in flight (limit --max-concurrent-streams)", cap(s.streams))
		}
	}
	start := time.Now()
	rq := &request.Request{Engine: cfg.engine, Extract: extract, Limits: s.limits, Idle: s.idle, Log: log, Remove: s.removals.run}
	// A read-only plugin's tree is shared between the requests that send the
	// same stream (unpack/trees.go); any other request unpacks into its own dir.
	if extract && cfg.plugin.Spec.ReadOnlyRepository {
		rq.Trees = s.trees
	} else if rpc == "MatchRepository" && cfg.plugin.DiscoveryReadsNamesOnly() {
		// A rule by file name or glob reads the tree's names, types and
		// links, never a file's content: every file is unpacked empty, so
		// that discovery, which the repo-server sends the whole repository
		// for, writes none of it. (A shared tree, when there is one, already
		// costs one unpack per repository.)
		rq.NamesOnly = true
	}
	rq.Admit = admission(s.metrics, rpc, cfg, log)
	var cached T
	if cache != nil {
		rq.Known = func(meta *pluginpb.ManifestRequestMetadata) bool {
			var hit bool
			cached, hit = cache.lookup(meta)
			return hit
		}
	}
	rq.Received = func(repo *unpack.Repo) {
		s.metrics.received(rpc, repo)
		if span.Recording() {
			span.Set(appAttributes(repo.Meta)...)
		}
		rq.Log.Debug("repository received", zap.Int64("compressed_bytes", repo.Size), zap.Int("files", repo.Files), zap.Bool("match_settled", repo.Settled),
			zap.String("env_names", command.EnvNames(repo.Meta.GetEnv())), zap.Duration("receive", time.Since(start)))
	}
	out, stage, err := request.Run(ctx, rq, stream, fn)
	log = rq.Log
	switch stage {
	case "":
		// duration counts from the stream's opening, which includes the
		// repo-server packing the repository before it sends the header;
		// after_header is the server's own part.
		log.Info("request done", zap.Duration("duration", time.Since(start)), zap.Duration("after_header", rq.SinceHeader()))
		if rq.FromCache {
			return cached, nil
		}
		if cache != nil {
			// Kept only now: the stream matched the checksum in its key, and
			// on a shared tree the answer is the one made from the tree as
			// unpacked (request.checkShared), not one a write had spoiled.
			cache.keep(out)
		}
		return out, nil
	case request.StageAdmit:
		return zero, err // logged and counted by admission
	case request.StageReceive:
		// A status error keeps its code through the wrapping (status.FromError).
		// A failed Recv is answered by gRPC itself, so the log is where its
		// text is seen.
		err = fmt.Errorf("%s: %w", unpack.ErrorPrefix(rpc), err)
		log.Warn("receive failed", zap.Error(err))
	case request.StageWorkspace:
		log.Warn("unpack failed", zap.Error(err))
	default:
		err = deadlineStatus(ctx, err)
		log.Warn("request failed", zap.Error(err), zap.Duration("duration", time.Since(start)), zap.Duration("after_header", rq.SinceHeader()))
	}
	return zero, err
}

// appAttributes are the app a request renders, from the env the repo-server
// sends (names only Argo CD sets; a plugin's own ARGOCD_ENV_ values are never
// read).
func appAttributes(meta *pluginpb.ManifestRequestMetadata) []attribute.KeyValue {
	attrs := []attribute.KeyValue{tracing.AttrAppPath.String(meta.GetAppRelPath())}
	for _, e := range meta.GetEnv() {
		switch e.GetName() {
		case keys.EnvAppName:
			attrs = append(attrs, tracing.AttrApp.String(e.GetValue()))
		case keys.EnvAppNamespace:
			attrs = append(attrs, tracing.AttrAppNS.String(e.GetValue()))
		case keys.EnvAppProjectName:
			attrs = append(attrs, tracing.AttrProject.String(e.GetValue()))
		}
	}
	return attrs
}

// deadlineStatus gives an error of a request that ran past its deadline (a
// command stopped at it, or the request's context ended by it) gRPC's
// DeadlineExceeded with Argo CD's text, "context deadline exceeded", and ours
// after it: Argo CD's repo-server gets that code, and clients and retries key
// on it. Other errors are sent as they are (code Unknown, as Argo CD's).
func deadlineStatus(ctx context.Context, err error) error {
	if _, ok := status.FromError(err); ok {
		return err // already a status (nil is not an error here)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return status.Errorf(codes.DeadlineExceeded, "%s (%s)", context.DeadlineExceeded, err)
	}
	return err
}

// newRequestID labels one request in the logs.
func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
