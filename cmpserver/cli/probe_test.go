package cli

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
)

// runProbe runs "cmp-server probe args..." with extra env and returns its exit
// code and output.
func runProbe(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"probe"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	return servingtest.Run(t, cmd)
}

// wantFailure checks exit 1 with exactly one line on stderr naming why.
func wantFailure(t *testing.T, code int, stderr string, reasons ...string) {
	t.Helper()
	if code != 1 || strings.Count(strings.TrimSuffix(stderr, "\n"), "\n") != 0 {
		t.Errorf("exit %d, want 1 with one line; stderr:\n%s", code, stderr)
	}
	for _, r := range reasons {
		if !strings.Contains(stderr, r) {
			t.Errorf("stderr lacks %q: %s", r, stderr)
		}
	}
}

func TestProbeServingThenStale(t *testing.T) {
	t.Parallel()
	configDir, socketDir, workDir := layout(t, echoPlugin)
	socket := filepath.Join(socketDir, "echo.sock")

	code, _, stderr := runProbe(t, nil, "--config-dir", configDir, "--socket-dir", socketDir)
	wantFailure(t, code, stderr, "no socket at "+socket, "is not listening")

	srv := startServer(t, configDir, socketDir, workDir, socket)
	code, stdout, stderr := runProbe(t, nil, "--config-dir", configDir, "--socket-dir", socketDir)
	if code != 0 || !strings.Contains(stdout, socket) {
		t.Fatalf("probe of a serving server: exit %d\n%s%s", code, stdout, stderr)
	}
	// The sidecar passes the socket dir as serve reads it: from the env.
	code, _, stderr = runProbe(t, []string{"ARGOCD_PLUGINSOCKFILEPATH=" + socketDir}, "--config-dir", configDir)
	if code != 0 {
		t.Fatalf("probe with the socket dir from the env: exit %d\n%s", code, stderr)
	}

	// SIGKILL leaves the socket file behind with nobody listening, as a
	// crashed plugin server does.
	if err := srv.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the server to die", func() bool { return syscall.Kill(srv.Process.Pid, 0) != nil })
	if _, err := os.Stat(socket); err != nil {
		t.Fatalf("the killed server's socket is gone, so this does not test a stale socket: %v", err)
	}
	code, _, stderr = runProbe(t, nil, "--config-dir", configDir, "--socket-dir", socketDir)
	wantFailure(t, code, stderr, socket, "connection refused", "stale socket")
}

// A listener that accepts but never speaks gRPC: the probe gives up after
// --timeout with a reason instead of hanging.
func TestProbeTimesOut(t *testing.T) {
	t.Parallel()
	configDir, socketDir, _ := layout(t, echoPlugin)
	if err := os.MkdirAll(socketDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(socketDir, "echo.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	code, _, stderr := runProbe(t, nil, "--config-dir", configDir, "--socket-dir", socketDir, "--timeout", "300ms")
	wantFailure(t, code, stderr, "no answer to CheckPluginConfiguration within 300ms")
}

func TestProbeBadInput(t *testing.T) {
	t.Parallel()
	configDir, socketDir, _ := layout(t, "kind: Plugin\nmetadata: {}\n")
	code, _, stderr := runProbe(t, nil, "--config-dir", configDir, "--socket-dir", socketDir)
	wantFailure(t, code, stderr, "kind should be ConfigManagementPlugin", "metadata.name should be non-empty")

	code, _, stderr = runProbe(t, nil, "--config-dir", filepath.Join(configDir, "missing"))
	wantFailure(t, code, stderr, "reading plugin configuration")

	// A regular file where the socket should be.
	configDir, socketDir, _ = layout(t, echoPlugin)
	if err := os.MkdirAll(socketDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(socketDir, "echo.sock"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runProbe(t, nil, "--config-dir", configDir, "--socket-dir", socketDir)
	wantFailure(t, code, stderr, "is not a socket")

	if code, _, stderr := runProbe(t, nil, "extra"); code != 2 || !strings.Contains(stderr, "Run 'cmp-server probe --help' for usage.") {
		t.Errorf("extra argument: exit %d\n%s", code, stderr)
	}
}
