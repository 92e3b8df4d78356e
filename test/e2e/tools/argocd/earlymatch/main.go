// Command earlymatch asks whether Argo CD's repo-server accepts a
// MatchRepository answer given before its stream ends: a server that answers
// as soon as its rule is decided, then either returns at once ("return") or
// reads the rest of the stream before returning ("drain"), is called by Argo
// CD's own discovery code (util/app/discovery.DetectConfigManagementPlugin)
// with repositories of growing size. It prints, per mode and size, what
// Argo CD's client got and how many bytes the server read.
//
//	earlymatch [--sizes 1,64,1024,16384]   (KiB of incompressible data)
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	pluginclient "github.com/argoproj/argo-cd/v3/cmpserver/apiclient"
	"github.com/argoproj/argo-cd/v3/util/app/discovery"
)

type server struct {
	pluginclient.UnimplementedConfigManagementPluginServiceServer
	drain bool
	read  atomic.Int64
}

func (s *server) CheckPluginConfiguration(context.Context, *emptypb.Empty) (*pluginclient.CheckPluginConfigurationResponse, error) {
	return &pluginclient.CheckPluginConfigurationResponse{IsDiscoveryConfigured: true}, nil
}

func (s *server) MatchRepository(stream pluginclient.ConfigManagementPluginService_MatchRepositoryServer) error {
	if _, err := stream.Recv(); err != nil { // the header: decided on it
		return err
	}
	if err := stream.SendAndClose(&pluginclient.RepositoryResponse{IsSupported: true, IsDiscoveryEnabled: true}); err != nil {
		return err
	}
	if !s.drain {
		return nil
	}
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		s.read.Add(int64(len(m.GetFile().GetChunk())))
	}
}

func main() {
	sizes := flag.String("sizes", "1,64,1024,16384", "repository sizes in KiB (random, incompressible)")
	flag.Parse()
	base, err := os.MkdirTemp("", "earlymatch-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(base)
	fmt.Println("mode\tKiB\tresult\tbytes read by the server after its answer")
	for _, mode := range []string{"return", "drain"} {
		for _, f := range strings.Split(*sizes, ",") {
			kib, err := strconv.Atoi(f)
			if err != nil {
				fail(err)
			}
			res, n, err := try(base, mode, kib)
			if err != nil {
				fail(err)
			}
			fmt.Printf("%s\t%d\t%s\t%d\n", mode, kib, res, n)
		}
	}
}

func try(base, mode string, kib int) (string, int64, error) {
	dir, err := os.MkdirTemp(base, "run-")
	if err != nil {
		return "", 0, err
	}
	repo, socks := filepath.Join(dir, "repo"), filepath.Join(dir, "plugins")
	for _, d := range []string{repo, socks} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", 0, err
		}
	}
	data := make([]byte, kib<<10)
	_, _ = rand.Read(data)
	if err := os.WriteFile(filepath.Join(repo, "data.bin"), data, 0o644); err != nil {
		return "", 0, err
	}
	l, err := net.Listen("unix", filepath.Join(socks, "early.sock"))
	if err != nil {
		return "", 0, err
	}
	s := &server{drain: mode == "drain"}
	g := grpc.NewServer()
	pluginclient.RegisterConfigManagementPluginServiceServer(g, s)
	go func() { _ = g.Serve(l) }()
	defer g.Stop()
	if err := os.Setenv("ARGOCD_PLUGINSOCKFILEPATH", socks); err != nil {
		return "", 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, _, err := discovery.DetectConfigManagementPlugin(ctx, repo, repo, "", nil, nil)
	res := "matched"
	if err != nil {
		res = "error: " + err.Error()
	} else {
		conn.Close()
	}
	return res, s.read.Load(), nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
