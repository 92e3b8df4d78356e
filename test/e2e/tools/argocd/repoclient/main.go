// Command repoclient calls Argo CD's repo-server through its own gRPC API, with
// the request and response types of the Argo CD release it is built against, the
// way the application controller and the API server call it.
//
//	repoclient --addr 127.0.0.1:8081 generate   < ManifestRequest JSON   > ManifestResponse JSON
//	repoclient --addr 127.0.0.1:8081 appdetails < RepoServerAppDetailsQuery JSON > RepoAppDetailsResponse JSON
//
// A failed call prints the gRPC status message on stderr and exits 1: that text is
// what Argo CD shows users, so the tests read it. The same source builds against
// Argo CD v2 (hack/tools.sh rewrites the import path through a build overlay).
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/argoproj/argo-cd/v3/reposerver/apiclient"
)

func main() {
	addr := flag.String("addr", "", "repo-server gRPC address")
	timeout := flag.Duration("timeout", 3*time.Minute, "deadline of the call")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: repoclient --addr HOST:PORT generate|appdetails < request.json")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *addr == "" || flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*addr, *timeout, flag.Arg(0)); err != nil {
		if st, ok := status.FromError(err); ok {
			fmt.Fprintln(os.Stderr, st.Message())
		} else {
			fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(1)
	}
}

func run(addr string, timeout time.Duration, call string) error {
	// TLS without verifying the repo-server's self-signed certificate: what
	// Argo CD's own callers do unless --repo-server-strict-tls is set.
	creds := credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12})
	// grpc.Dial, not NewClient: Argo CD v2's grpc-go predates NewClient.
	conn, err := grpc.Dial(addr, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(100<<20)))
	if err != nil {
		return err
	}
	defer conn.Close()
	repo := apiclient.NewRepoServerServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	dec := json.NewDecoder(os.Stdin)
	dec.DisallowUnknownFields()
	var out any
	switch call {
	case "generate":
		var req apiclient.ManifestRequest
		if err := dec.Decode(&req); err != nil {
			return fmt.Errorf("decode ManifestRequest: %w", err)
		}
		out, err = repo.GenerateManifest(ctx, &req)
	case "appdetails":
		var req apiclient.RepoServerAppDetailsQuery
		if err := dec.Decode(&req); err != nil {
			return fmt.Errorf("decode RepoServerAppDetailsQuery: %w", err)
		}
		out, err = repo.GetAppDetails(ctx, &req)
	default:
		return fmt.Errorf("unknown call %q (want generate or appdetails)", call)
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}
