package askpass

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cmp-injector/cmp-injector/cmpserver/askpass/askpasspb"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// store answers as Argo CD's askpass server does: the credentials of a known
// nonce, NotFound otherwise.
type store struct {
	askpasspb.UnimplementedAskPassServiceServer
	creds map[string][2]string
}

func (s *store) GetCredentials(_ context.Context, r *askpasspb.CredentialsRequest) (*askpasspb.CredentialsResponse, error) {
	c, ok := s.creds[r.GetNonce()]
	if !ok {
		return nil, status.Error(codes.NotFound, "unknown nonce")
	}
	return &askpasspb.CredentialsResponse{Username: c[0], Password: c[1]}, nil
}

func serve(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "askpass.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	askpasspb.RegisterAskPassServiceServer(srv, &store{creds: map[string][2]string{"n1": {"alice", "s3cret"}}})
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return sock
}

func TestAnswersGitsPrompts(t *testing.T) {
	sock := serve(t)
	env := map[string]string{keys.EnvAskPassNonce: "n1", keys.EnvAskPassSock: sock, keys.EnvBinaryName: keys.BinaryNameGitAskPass}
	getenv := func(k string) string { return env[k] }
	for prompt, want := range map[string]string{
		"Username for 'https://git.example.com': ":       "alice\n",
		"Password for 'https://alice@git.example.com': ": "s3cret\n",
	} {
		var out, errb bytes.Buffer
		if code := Main(context.Background(), getenv, []string{prompt}, &out, &errb); code != 0 || out.String() != want {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", prompt, code, out.String(), errb.String())
		}
	}
	for name, tc := range map[string]struct {
		env  map[string]string
		want string
	}{
		"unknown nonce": {map[string]string{keys.EnvAskPassNonce: "other", keys.EnvAskPassSock: sock}, "unknown nonce"},
		"no nonce":      {map[string]string{keys.EnvAskPassSock: sock}, "ARGOCD_GIT_ASKPASS_NONCE is not set"},
		// A sidecar without consent has no socket at that path.
		"no socket": {map[string]string{keys.EnvAskPassNonce: "n1", keys.EnvAskPassSock: filepath.Join(t.TempDir(), "none.sock")},
			"is this plugin's catalog entry gitCredentials: true?"},
	} {
		var out, errb bytes.Buffer
		code := Main(context.Background(), func(k string) string { return tc.env[k] }, []string{"Password for 'x': "}, &out, &errb)
		if code == 0 || out.Len() != 0 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", name, code, out.String(), errb.String())
		}
	}
}

func TestIsAskPass(t *testing.T) {
	on := func(string) string { return keys.BinaryNameGitAskPass }
	off := func(string) string { return "" }
	for _, tc := range []struct {
		getenv func(string) string
		args   []string
		want   bool
	}{
		{on, []string{"Username for 'https://h': "}, true},
		{on, []string{"Password for 'https://u@h': "}, true},
		{off, []string{"Username for 'https://h': "}, false},
		{on, []string{"serve"}, false},
		{on, []string{"Username", "extra"}, false},
		{on, nil, false},
	} {
		if got := IsAskPass(tc.getenv, tc.args); got != tc.want {
			t.Errorf("%v: %v", tc.args, got)
		}
	}
}

func TestEnvPointsGitAtTheServer(t *testing.T) {
	in := []string{"PATH=/bin", "GIT_ASKPASS=argocd", "ARGOCD_BINARY_NAME=argocd-git-ask-pass"}
	// With the link dir: first on PATH, GIT_ASKPASS as Argo CD set it.
	got := Env(in, "/var/run/argocd/cmp-server", "/tmp/_cmp_server/.askpass")
	if !slices.Equal(got, []string{"PATH=/tmp/_cmp_server/.askpass:/bin", "GIT_ASKPASS=argocd", "ARGOCD_BINARY_NAME=argocd-git-ask-pass"}) {
		t.Errorf("%v", got)
	}
	// Without it, or without a PATH to extend: GIT_ASKPASS names the server.
	for _, c := range []struct {
		env    []string
		binDir string
		want   []string
	}{
		{in, "", []string{"PATH=/bin", "GIT_ASKPASS=/var/run/argocd/cmp-server", "ARGOCD_BINARY_NAME=argocd-git-ask-pass"}},
		{[]string{"GIT_ASKPASS=argocd"}, "/d", []string{"GIT_ASKPASS=/var/run/argocd/cmp-server"}},
		{[]string{"PATH=", "GIT_ASKPASS=argocd"}, "/d", []string{"PATH=/d", "GIT_ASKPASS=argocd"}},
	} {
		if got := Env(c.env, "/var/run/argocd/cmp-server", c.binDir); !slices.Equal(got, c.want) {
			t.Errorf("Env(%v, %q) = %v, want %v", c.env, c.binDir, got, c.want)
		}
	}
	if in[0] != "PATH=/bin" || in[1] != "GIT_ASKPASS=argocd" {
		t.Error("input modified")
	}
	// A plugin's own askpass program, or a later entry that replaces
	// Argo CD's, is left alone, PATH too.
	for _, env := range [][]string{{"PATH=/bin", "GIT_ASKPASS=/usr/bin/my-askpass"}, {"PATH=/bin", "GIT_ASKPASS=argocd", "GIT_ASKPASS=/x"}, {"PATH=/bin"}} {
		for _, dir := range []string{"", "/d"} {
			if got := Env(env, "/self", dir); !slices.Equal(got, env) {
				t.Errorf("%v became %v", env, got)
			}
		}
	}
}

func TestLinkDirNamesTheServerArgoCD(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".askpass")
	for range 2 { // a restart finds the old link
		if err := LinkDir(dir, "/var/run/argocd/cmp-server"); err != nil {
			t.Fatalf("LinkDir: %v", err)
		}
	}
	if target, err := os.Readlink(filepath.Join(dir, "argocd")); err != nil || target != "/var/run/argocd/cmp-server" {
		t.Errorf("argocd links to %q, %v", target, err)
	}
	if err := LinkDir("/proc/no-such-dir/x", "/self"); err == nil {
		t.Error("LinkDir in an unwritable place succeeded")
	}
}
