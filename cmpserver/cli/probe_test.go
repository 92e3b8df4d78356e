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

// --wait is the postStart hook: started before the server, it keeps trying
// and exits 0 once the server answers, with nothing in the termination log.
func TestProbeWaitsForServer(t *testing.T) {
	t.Parallel()
	configDir, socketDir, workDir := layout(t, echoPlugin)
	socket := filepath.Join(socketDir, "echo.sock")
	termLog := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(termLog, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "probe", "--wait", "--timeout", "60s", "--termination-log", termLog,
		"--config-dir", configDir, "--socket-dir", socketDir)
	var stdout strings.Builder
	cmd.Stdout = &stdout
	logs, exited := startCmd(t, cmd)
	// The probe is running and has not given up before there is a server.
	select {
	case err := <-exited:
		t.Fatalf("probe --wait exited before the server started: %v\n%s", err, logs.String())
	default:
	}
	startServer(t, configDir, socketDir, workDir, socket)
	if err := <-exited; err != nil {
		t.Fatalf("probe --wait: %v\n%s", err, logs.String())
	}
	if !strings.Contains(stdout.String(), socket+" answers") {
		t.Errorf("stdout: %q", stdout.String())
	}
	if b, err := os.ReadFile(termLog); err != nil || len(b) != 0 {
		t.Errorf("termination log after a success: %q %v", b, err)
	}
}

// A server that never listens: --wait gives up after --timeout, naming the
// plugin and the last reason, on stderr and in the termination log the
// kubelet reports after it kills the container.
func TestProbeWaitGivesUp(t *testing.T) {
	t.Parallel()
	configDir, socketDir, _ := layout(t, echoPlugin)
	termLog := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(termLog, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runProbe(t, nil, "--wait", "--timeout", "300ms", "--termination-log", termLog,
		"--config-dir", configDir, "--socket-dir", socketDir)
	reasons := []string{"plugin echo did not start", "not answering after 300ms", "no socket at " + filepath.Join(socketDir, "echo.sock")}
	wantFailure(t, code, stderr, reasons...)
	b, err := os.ReadFile(termLog)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reasons {
		if !strings.Contains(string(b), r) {
			t.Errorf("termination log lacks %q: %q", r, b)
		}
	}
}

// An invalid plugin.yaml fails serve too: --wait reports it at once instead
// of waiting for a socket that will never come (its reason would then be the
// missing socket, not the config).
func TestProbeWaitBadConfig(t *testing.T) {
	t.Parallel()
	configDir, socketDir, _ := layout(t, "kind: Plugin\nmetadata: {}\n")
	termLog := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(termLog, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runProbe(t, nil, "--wait", "--timeout", "30s", "--termination-log", termLog,
		"--config-dir", configDir, "--socket-dir", socketDir)
	wantFailure(t, code, stderr, "kind should be ConfigManagementPlugin", "metadata.name should be non-empty")
	if strings.Contains(stderr, "did not start") {
		t.Errorf("waited for a socket instead of reporting the config: %s", stderr)
	}
	if b, _ := os.ReadFile(termLog); !strings.Contains(string(b), "metadata.name should be non-empty") {
		t.Errorf("termination log: %q", b)
	}
}
