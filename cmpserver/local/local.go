// Package local runs a plugin without a socket (cmp-server run, the
// playground): the repository is packed as the repo-server packs it and run
// through the same request as a sidecar's (package request).
package local

import (
	"context"
	"errors"
	"io"
	"os"

	"go.uber.org/zap"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/cmpserver/command"
	"github.com/cmp-injector/cmp-injector/cmpserver/engine"
	"github.com/cmp-injector/cmp-injector/cmpserver/manifests"
	"github.com/cmp-injector/cmp-injector/cmpserver/pluginpb"
	"github.com/cmp-injector/cmp-injector/cmpserver/redact"
	"github.com/cmp-injector/cmp-injector/cmpserver/request"
	"github.com/cmp-injector/cmp-injector/cmpserver/unpack"
	"github.com/cmp-injector/cmp-injector/pkg/params"
	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
)

// Request is one local run of a plugin: the repository is packed as the
// repo-server packs it and unpacked through the server's own code path
// (limits, preserveFileMode, env assembly), so results match a sidecar's.
type Request struct {
	Plugin     *pluginconfig.Plugin
	RepoRoot   string
	AppRelPath string
	// Env is the request env (NAME=value), e.g. from client.App.Environ.
	Env []string
	// BaseEnv is the environment every command starts from (a sidecar's
	// own; cmp-server run gives its process's).
	BaseEnv []string
	// Limits and Exec: a zero field means none (unpack.DefaultLimits and
	// command.DefaultOptions are serve's).
	Limits unpack.Limits
	Exec   command.Options
	Logger *zap.Logger
	// LogLevel and LogFormat are exported to the commands as a sidecar's server
	// exports its own (see Options.LogLevel).
	LogLevel, LogFormat string
	// OnCommand, when set, is called after each plugin command with how it
	// ended, stderr included (which a sidecar only logs on success).
	OnCommand func(command.Report)
}

// Generate runs init and generate and returns one JSON string per object.
func Generate(ctx context.Context, req Request) ([]string, error) {
	return run(ctx, req, true, func(ctx context.Context, e *engine.Engine, ws *engine.Workspace) ([]string, error) {
		var out []string
		err := e.Generate(ctx, ws, manifests.SinkFunc(func(doc []byte) error {
			out = append(out, string(doc))
			return nil
		}))
		return out, err
	})
}

// Parameters returns the merged parameters announcement.
func Parameters(ctx context.Context, req Request) ([]params.Announcement, error) {
	return run(ctx, req, true, func(ctx context.Context, e *engine.Engine, ws *engine.Workspace) ([]params.Announcement, error) {
		return e.Parameters(ctx, ws)
	})
}

// Match evaluates discovery.
func Match(ctx context.Context, req Request) (bool, error) {
	return run(ctx, req, req.Plugin.DiscoveryConfigured(), func(ctx context.Context, e *engine.Engine, ws *engine.Workspace) (bool, error) {
		return e.Match(ctx, ws)
	})
}

// run is one local request: its error's text is redacted as a sidecar's.
func run[T any](ctx context.Context, req Request, extract bool, fn func(context.Context, *engine.Engine, *engine.Workspace) (T, error)) (T, error) {
	if req.Exec.Redact == nil {
		// As a sidecar's server: the Secret values its env names.
		req.Exec.Redact = redact.FromEnv(req.BaseEnv)
	}
	out, err := runRequest(ctx, req, extract, fn)
	return out, req.Exec.Redact.Error(err)
}

func runRequest[T any](ctx context.Context, req Request, extract bool, fn func(context.Context, *engine.Engine, *engine.Workspace) (T, error)) (T, error) {
	var zero T
	if err := errors.Join(append(req.Limits.Problems(), req.Exec.Problems()...)...); err != nil {
		return zero, err
	}
	if err := req.Plugin.Validate(); err != nil {
		return zero, err
	}
	if err := command.NormalizeLogSettings(&req.LogLevel, &req.LogFormat); err != nil {
		return zero, err
	}
	log := req.Logger
	if log == nil {
		log = zap.NewNop()
	}
	workDir, err := os.MkdirTemp("", "cmp-local-")
	if err != nil {
		return zero, err
	}
	defer os.RemoveAll(workDir)
	tgz, err := client.WriteTarball(req.RepoRoot, workDir, nil)
	if err != nil {
		return zero, err
	}
	entries, err := client.EnvEntries(req.Env)
	if err != nil {
		return zero, err
	}
	appRel := req.AppRelPath
	if appRel == "" {
		appRel = "."
	}
	env := append(append([]string{}, req.BaseEnv...), command.LogEnv(req.LogLevel, req.LogFormat)...)
	obs := command.ObserverFunc(func(command.Report) {})
	if req.OnCommand != nil {
		obs = req.OnCommand
	}
	e := engine.New(req.Plugin, req.Limits, workDir, req.Exec, env, log, obs)
	f, err := os.Open(tgz.Path)
	if err != nil {
		return zero, err
	}
	defer f.Close()
	// The server's request, without its idle bound, shared trees or removal
	// after the response.
	rq := &request.Request{Engine: e, Extract: extract, Limits: req.Limits, Log: log}
	out, _, err := request.Run(ctx, rq, &tarballStream{ctx: ctx, meta: metadataFor(appRel, tgz, entries), r: f},
		func(ctx context.Context, ws *engine.Workspace) (T, error) { return fn(ctx, e, ws) })
	return out, err
}

// tarballStream plays the repo-server's side of a stream from a packed
// tarball, so that a local run is received and unpacked like a sidecar's request.
type tarballStream struct {
	ctx      context.Context
	meta     *pluginpb.ManifestRequestMetadata
	r        io.Reader
	sentMeta bool
}

func (s *tarballStream) Context() context.Context { return s.ctx }

func (s *tarballStream) Recv() (*pluginpb.AppStreamRequest, error) {
	if !s.sentMeta {
		s.sentMeta = true
		return &pluginpb.AppStreamRequest{Request: &pluginpb.AppStreamRequest_Metadata{Metadata: s.meta}}, nil
	}
	chunk := make([]byte, 256<<10)
	n, err := io.ReadFull(s.r, chunk)
	if n == 0 {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF
		}
		return nil, err
	}
	return &pluginpb.AppStreamRequest{Request: &pluginpb.AppStreamRequest_File{File: &pluginpb.File{Chunk: chunk[:n]}}}, nil
}

func metadataFor(appRel string, tgz *client.Tarball, env []*pluginpb.EnvEntry) *pluginpb.ManifestRequestMetadata {
	return &pluginpb.ManifestRequestMetadata{AppRelPath: appRel, Checksum: tgz.Checksum, Size: tgz.Size, Env: env}
}
