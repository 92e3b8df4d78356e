package cmpserver

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
	"github.com/cmp-injector/cmp-injector/cmpserver/unpack"
	"github.com/cmp-injector/cmp-injector/pkg/params"
	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
)

// LocalRequest runs a plugin without a socket: the repository is packed as the
// repo-server packs it and unpacked through the server's own code path (limits,
// preserveFileMode, env assembly), so results match a sidecar's.
type LocalRequest struct {
	Plugin     *pluginconfig.Plugin
	RepoRoot   string
	AppRelPath string
	// Env is the request env (NAME=value), e.g. from client.App.Environ.
	Env []string
	// BaseEnv is the environment every command starts from (a sidecar's
	// own; cmp-server run gives its process's).
	BaseEnv []string
	// unpack.Limits and Exec: a zero field means none (DefaultLimits and
	// DefaultExecOptions are serve's).
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

// LocalGenerate runs init and generate and returns one JSON string per object.
func LocalGenerate(ctx context.Context, req LocalRequest) ([]string, error) {
	var out []string
	err := runLocal(ctx, req, true, func(e *engine.Engine, ws *engine.Workspace) error {
		return e.Generate(ctx, ws, manifests.SinkFunc(func(doc []byte) error {
			out = append(out, string(doc))
			return nil
		}))
	})
	return out, err
}

// LocalParameters returns the merged parameters announcement.
func LocalParameters(ctx context.Context, req LocalRequest) ([]params.Announcement, error) {
	var out []params.Announcement
	err := runLocal(ctx, req, true, func(e *engine.Engine, ws *engine.Workspace) (err error) {
		out, err = e.Parameters(ctx, ws)
		return err
	})
	return out, err
}

// LocalMatch evaluates discovery.
func LocalMatch(ctx context.Context, req LocalRequest) (bool, error) {
	var out bool
	err := runLocal(ctx, req, req.Plugin.DiscoveryConfigured(), func(e *engine.Engine, ws *engine.Workspace) (err error) {
		out, err = e.Match(ctx, ws)
		return err
	})
	return out, err
}

func runLocal(ctx context.Context, req LocalRequest, extract bool, fn func(*engine.Engine, *engine.Workspace) error) error {
	if req.Exec.Redact == nil {
		// As a sidecar's server: the Secret values its env names (redact.go).
		req.Exec.Redact = redact.FromEnv(req.BaseEnv)
	}
	return req.Exec.Redact.Error(runLocalRequest(ctx, req, extract, fn))
}

func runLocalRequest(ctx context.Context, req LocalRequest, extract bool, fn func(*engine.Engine, *engine.Workspace) error) error {
	opts := DefaultOptions()
	opts.Plugin, opts.Limits, opts.Exec, opts.Logger = req.Plugin, req.Limits, req.Exec, req.Logger
	if err := opts.Validate(); err != nil {
		return err
	}
	if err := req.Plugin.Validate(); err != nil {
		return err
	}
	if err := command.NormalizeLogSettings(&req.LogLevel, &req.LogFormat); err != nil {
		return err
	}
	workDir, err := os.MkdirTemp("", "cmp-local-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(workDir)
	tgz, err := client.WriteTarball(req.RepoRoot, workDir, nil)
	if err != nil {
		return err
	}
	entries, err := client.EnvEntries(req.Env)
	if err != nil {
		return err
	}
	appRel := req.AppRelPath
	if appRel == "" {
		appRel = "."
	}
	env := append(append([]string{}, req.BaseEnv...), command.LogEnv(req.LogLevel, req.LogFormat)...)
	e := engine.New(req.Plugin, opts.Limits, workDir, opts.Exec, env, opts.Logger, newMetrics())
	e.OnCommand(req.OnCommand)
	f, err := os.Open(tgz.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	// The server's request, without its idle bound, shared trees or removal
	// after the response.
	rq := &request{eng: e, extract: extract, limits: opts.Limits, log: opts.Logger, remove: func(remove func()) { remove() }}
	if err := rq.begin(); err != nil {
		return err
	}
	defer rq.end()
	if err := rq.receive(&tarballStream{ctx: ctx, meta: metadataFor(appRel, tgz, entries), r: f}); err != nil {
		return err
	}
	if _, err := rq.workspace(); err != nil {
		return err
	}
	return rq.run(ctx, func(_ context.Context, ws *engine.Workspace) error { return fn(e, ws) })
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
