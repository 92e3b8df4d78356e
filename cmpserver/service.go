package cmpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/cmp-injector/cmp-injector/cmpserver/command"
	"github.com/cmp-injector/cmp-injector/cmpserver/engine"
	"github.com/cmp-injector/cmp-injector/cmpserver/pluginpb"
	"github.com/cmp-injector/cmp-injector/cmpserver/unpack"
)

// service implements plugin.ConfigManagementPluginService. Errors are plain Go
// errors, which gRPC sends as code Unknown with the message, as Argo CD does.
type service struct {
	pluginpb.UnimplementedConfigManagementPluginServiceServer
	s *Server
}

func (svc *service) CheckPluginConfiguration(context.Context, *emptypb.Empty) (*pluginpb.CheckPluginConfigurationResponse, error) {
	p := svc.s.config().plugin
	return &pluginpb.CheckPluginConfigurationResponse{
		IsDiscoveryConfigured: p.DiscoveryConfigured(),
		ProvideGitCreds:       p.Spec.ProvideGitCreds,
	}, nil
}

func (svc *service) GenerateManifest(stream pluginpb.ConfigManagementPluginService_GenerateManifestServer) error {
	// The response is built in wire form as the output is split (see codec.go);
	// SendMsg is what SendAndClose calls with a *ManifestResponse.
	var manifests encodedManifests
	cfg := svc.s.config()
	err := svc.s.withRepo(stream, "GenerateManifest", true, cfg, func(ctx context.Context, ws *engine.Workspace) error {
		// A run on a shared tree that was changed is run again (request.run).
		manifests = encodedManifests{}
		if err := cfg.engine.Generate(ctx, ws, &manifests); err != nil {
			return fmt.Errorf("error generating manifests: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return stream.SendMsg(&manifests)
}

func (svc *service) MatchRepository(stream pluginpb.ConfigManagementPluginService_MatchRepositoryServer) error {
	cfg := svc.s.config()
	configured := cfg.plugin.DiscoveryConfigured()
	supported := false
	// Without discovery the stream is still read to the end (v2.10-2.12 clients
	// send it even to named plugins and fail if it is cut short), but not unpacked.
	err := svc.s.withRepo(stream, "MatchRepository", configured, cfg, func(ctx context.Context, ws *engine.Workspace) error {
		var err error
		if supported, err = cfg.engine.Match(ctx, ws); err != nil {
			return fmt.Errorf("match repository error: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return stream.SendAndClose(&pluginpb.RepositoryResponse{IsSupported: supported, IsDiscoveryEnabled: configured})
}

func (svc *service) GetParametersAnnouncement(stream pluginpb.ConfigManagementPluginService_GetParametersAnnouncementServer) error {
	var resp pluginpb.ParametersAnnouncementResponse
	cfg := svc.s.config()
	err := svc.s.withRepo(stream, "GetParametersAnnouncement", true, cfg, func(ctx context.Context, ws *engine.Workspace) error {
		as, err := cfg.engine.Parameters(ctx, ws)
		if err != nil {
			return fmt.Errorf("get parameters announcement error: %w", err)
		}
		resp.ParameterAnnouncements = pluginpb.FromAnnouncements(as)
		return nil
	})
	if err != nil {
		return err
	}
	return stream.SendAndClose(&resp)
}

// withRepo runs one request (request.go): receives and unpacks one repository, runs
// fn on it and removes the dir. The request runs on cfg, the configuration
// current when it started, to its end. Logs carry a request id and the
// configuration's hash, never env values.
func (s *Server) withRepo(stream unpack.Stream, rpc string, extract bool, cfg *loaded, fn func(context.Context, *engine.Workspace) error) error {
	ctx := stream.Context()
	log := s.log.With(zap.String("request_id", newRequestID()), zap.String("rpc", rpc), zap.String("config_hash", cfg.hash))
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
			return status.Errorf(codes.ResourceExhausted, "too many concurrent requests: %d are in flight (limit --max-concurrent-streams)", cap(s.streams))
		}
	}
	start := time.Now()
	rq := &request{eng: cfg.engine, extract: extract, limits: s.opts.Limits, idle: s.opts.StreamIdleTimeout, log: log, remove: s.removals.run}
	// A read-only plugin's tree is shared between the requests that send the
	// same stream (trees.go); any other request unpacks into its own dir.
	if extract && cfg.plugin.Spec.ReadOnlyRepository {
		rq.trees = s.trees
	}
	rq.admit = s.admission(rpc, cfg, log)
	defer rq.end()
	if err := rq.receive(stream); err != nil {
		if rq.refused {
			return err // logged and counted by admission
		}
		// A status error keeps its code through the wrapping (status.FromError).
		// A failed Recv is answered by gRPC itself, so the log is where its
		// text is seen.
		err = fmt.Errorf("%s: %w", unpack.ErrorPrefix(rpc), err)
		log.Warn("receive failed", zap.Error(err))
		return err
	}
	s.metrics.received(rpc, rq.repo.Size)
	log = rq.log
	if _, err := rq.workspace(); err != nil {
		log.Warn("unpack failed", zap.Error(err))
		return err
	}
	log.Debug("repository received", zap.Int64("compressed_bytes", rq.repo.Size),
		zap.String("env_names", command.EnvNames(rq.repo.Meta.GetEnv())), zap.Duration("receive", time.Since(start)))
	if err := rq.run(ctx, fn); err != nil {
		err = deadlineStatus(ctx, err)
		log.Warn("request failed", zap.Error(err), zap.Duration("duration", time.Since(start)), zap.Duration("after_header", rq.sinceHeader()))
		return err
	}
	// duration counts from the stream's opening, which includes the
	// repo-server packing the repository before it sends the header;
	// after_header is the server's own part.
	log.Info("request done", zap.Duration("duration", time.Since(start)), zap.Duration("after_header", rq.sinceHeader()))
	return nil
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
