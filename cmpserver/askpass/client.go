// Package askpass is the plugin server's side of Argo CD's git credentials for
// plugins (provideGitCreds): the askpass client that git in a plugin command
// runs, which asks the repo-server's askpass socket for the credentials of
// the request's nonce, and the command env that makes git run it.
//
// Argo CD sends GIT_ASKPASS=argocd with ARGOCD_BINARY_NAME=argocd-git-ask-pass,
// expecting its own multi-call binary on the plugin's PATH; plugin images
// rarely carry it. The plugin server, already in every sidecar, takes that
// role instead (Env points GIT_ASKPASS at it), so no image needs Argo CD's
// binary.
package askpass

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cmp-injector/cmp-injector/cmpserver/askpass/askpasspb"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// defaultSocket is where Argo CD's repo-server listens unless
// ARGOCD_ASK_PASS_SOCK moves it.
const defaultSocket = "/tmp/reposerver-ask-pass.sock"

// timeout bounds one question: git waits for the answer with nothing else to
// do, and a socket nobody serves must fail the clone, not hang it.
const timeout = 10 * time.Second

// IsAskPass reports whether the process was started as git's askpass program:
// Argo CD's variable selects the role, and git passes exactly one argument,
// its prompt. Both are needed, so a plugin command that runs the plugin
// server for any other reason while credentials are in its env is not taken
// for one.
func IsAskPass(getenv func(string) string, args []string) bool {
	return getenv(keys.EnvBinaryName) == keys.BinaryNameGitAskPass && len(args) == 1 &&
		(strings.HasPrefix(args[0], "Username") || strings.HasPrefix(args[0], "Password"))
}

// Main answers git's prompt (args[0]) on stdout with the username or the
// password of the nonce in the environment, as Argo CD's argocd-git-ask-pass
// does, and returns the exit code; a failure says why on stderr, which git
// shows in its own error.
func Main(ctx context.Context, getenv func(string) string, args []string, stdout, stderr io.Writer) int {
	if err := answer(ctx, getenv, args[0], stdout); err != nil {
		fmt.Fprintf(stderr, "cmp-server (git askpass): %v\n", err)
		return 1
	}
	return 0
}

func answer(ctx context.Context, getenv func(string) string, prompt string, stdout io.Writer) error {
	nonce := getenv(keys.EnvAskPassNonce)
	if nonce == "" {
		return fmt.Errorf("%s is not set: the repo-server sent no credentials", keys.EnvAskPassNonce)
	}
	socket := getenv(keys.EnvAskPassSock)
	if socket == "" {
		socket = defaultSocket
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	creds, err := askpasspb.NewAskPassServiceClient(conn).GetCredentials(ctx, &askpasspb.CredentialsRequest{Nonce: nonce}, grpc.WaitForReady(false))
	if err != nil {
		return fmt.Errorf("the repo-server's askpass socket %s: %w (is this plugin's catalog entry gitCredentials: true?)", socket, err)
	}
	switch {
	case strings.HasPrefix(prompt, "Username"):
		_, err = fmt.Fprintln(stdout, creds.GetUsername())
	default:
		_, err = fmt.Fprintln(stdout, creds.GetPassword())
	}
	return err
}
