// Package client drives a plugin server over its unix socket the way Argo CD's
// repo-server does: a new plaintext HTTP/2 connection, keepalive pings every 20 s,
// and the repository streamed as a .tar.gz in 1 KiB chunks after a metadata
// message.
package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/cmp-injector/cmp-injector/cmpserver/pluginpb"
	"github.com/cmp-injector/cmp-injector/pkg/params"
)

// defaultChunkSize is the repo-server's ARGOCD_CMP_CHUNK_SIZE default.
const defaultChunkSize = 1024

// Client is one connection to a plugin socket.
type Client struct {
	conn *grpc.ClientConn
	rpc  pluginpb.ConfigManagementPluginServiceClient
}

// The repo-server's settings: a ping every 20 s, 100 MiB messages.
const (
	keepaliveTime = 20 * time.Second
	maxMsgSize    = 100 << 20
)

// Dial connects to socketPath and waits until the connection is ready or ctx ends.
func Dial(ctx context.Context, socketPath string) (*Client, error) {
	// The target only names the socket for :authority; the dialer uses the
	// path itself, as the repo-server does.
	dialer := func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socketPath)
	}
	conn, err := grpc.NewClient("passthrough:"+socketPath,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dialer),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: keepaliveTime}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize), grpc.MaxCallSendMsgSize(maxMsgSize)),
	)
	if err != nil {
		return nil, err
	}
	conn.Connect()
	for state := conn.GetState(); state != connectivity.Ready; state = conn.GetState() {
		if !conn.WaitForStateChange(ctx, state) {
			conn.Close()
			return nil, fmt.Errorf("connecting to %s: %w (last state %s)", socketPath, ctx.Err(), state)
		}
	}
	return &Client{conn: conn, rpc: pluginpb.NewConfigManagementPluginServiceClient(conn)}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Conn is the underlying connection, for callers that speak the raw protocol.
func (c *Client) Conn() *grpc.ClientConn { return c.conn }

// Request names what to send: the tree under RepoRoot, the app dir relative to
// it, and the build env as NAME=value pairs.
type Request struct {
	RepoRoot   string
	AppRelPath string
	Env        []string
	// Exclude lists filepath.Match patterns against relative paths, like
	// --plugin-tar-exclude.
	Exclude []string
}

// CheckResult is CheckPluginConfiguration's answer.
type CheckResult struct {
	DiscoveryConfigured bool `json:"isDiscoveryConfigured"`
	ProvideGitCreds     bool `json:"provideGitCreds"`
}

// MatchResult is MatchRepository's answer.
type MatchResult struct {
	Supported        bool `json:"isSupported"`
	DiscoveryEnabled bool `json:"isDiscoveryEnabled"`
}

// Check calls CheckPluginConfiguration.
func (c *Client) Check(ctx context.Context) (CheckResult, error) {
	resp, err := c.rpc.CheckPluginConfiguration(ctx, &emptypb.Empty{})
	if err != nil {
		return CheckResult{}, err
	}
	return CheckResult{DiscoveryConfigured: resp.GetIsDiscoveryConfigured(), ProvideGitCreds: resp.GetProvideGitCreds()}, nil
}

// Match streams the repository to MatchRepository.
func (c *Client) Match(ctx context.Context, req Request) (MatchResult, error) {
	resp, err := stream(ctx, c, req, c.rpc.MatchRepository)
	if err != nil {
		return MatchResult{}, err
	}
	return MatchResult{Supported: resp.GetIsSupported(), DiscoveryEnabled: resp.GetIsDiscoveryEnabled()}, nil
}

// Parameters streams the repository to GetParametersAnnouncement.
func (c *Client) Parameters(ctx context.Context, req Request) ([]params.Announcement, error) {
	resp, err := stream(ctx, c, req, c.rpc.GetParametersAnnouncement)
	if err != nil {
		return nil, err
	}
	return pluginpb.ToAnnouncements(resp.GetParameterAnnouncements()), nil
}

// Generate streams the repository to GenerateManifest and returns one JSON
// document per object.
func (c *Client) Generate(ctx context.Context, req Request) ([]string, error) {
	resp, err := stream(ctx, c, req, c.rpc.GenerateManifest)
	if err != nil {
		return nil, err
	}
	return resp.GetManifests(), nil
}

// stream opens one of the three client-streaming RPCs, sends the repository
// and waits for the single answer, as the repo-server does for each of them.
func stream[R any](ctx context.Context, c *Client, req Request,
	open func(context.Context, ...grpc.CallOption) (grpc.ClientStreamingClient[pluginpb.AppStreamRequest, R], error)) (*R, error) {
	s, err := open(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.send(s, req); err != nil {
		return nil, err
	}
	return s.CloseAndRecv()
}

type sender interface {
	Send(*pluginpb.AppStreamRequest) error
}

// send packs the repository first, then streams metadata and chunks.
func (c *Client) send(stream sender, req Request) error {
	tgz, err := WriteTarball(req.RepoRoot, "", req.Exclude)
	if err != nil {
		return err
	}
	defer tgz.Remove()
	f, err := os.Open(tgz.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	env, err := EnvEntries(req.Env)
	if err != nil {
		return err
	}
	appRel := req.AppRelPath
	if appRel == "" {
		appRel = "."
	}
	meta := &pluginpb.ManifestRequestMetadata{
		AppName:    filepath.Base(filepath.Join(req.RepoRoot, appRel)),
		AppRelPath: appRel,
		Checksum:   tgz.Checksum,
		Size:       tgz.Size,
		Env:        env,
	}
	return sendStream(stream, meta, f, defaultChunkSize)
}

// sendStream sends meta, then r in chunks of chunkSize bytes. It does not close
// the stream.
func sendStream(stream sender, meta *pluginpb.ManifestRequestMetadata, r io.Reader, chunkSize int) error {
	if err := stream.Send(&pluginpb.AppStreamRequest{Request: &pluginpb.AppStreamRequest_Metadata{Metadata: meta}}); err != nil {
		return fmt.Errorf("error sending metadata: %w", err)
	}
	if chunkSize <= 0 {
		chunkSize = defaultChunkSize
	}
	buf := make([]byte, chunkSize)
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			// The message is marshalled by Send, so buf can be reused.
			msg := &pluginpb.AppStreamRequest{Request: &pluginpb.AppStreamRequest_File{File: &pluginpb.File{Chunk: buf[:n]}}}
			if serr := stream.Send(msg); serr != nil {
				return fmt.Errorf("error sending file: %w", serr)
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// EnvEntries converts NAME=value pairs to the wire form.
func EnvEntries(env []string) ([]*pluginpb.EnvEntry, error) {
	out := make([]*pluginpb.EnvEntry, 0, len(env))
	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("env entry %q is not NAME=value", kv)
		}
		out = append(out, &pluginpb.EnvEntry{Name: name, Value: value})
	}
	return out, nil
}
