package cli

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The binary serves the page with the command line's build env and
// parameters, says where, and stops cleanly on SIGTERM.
func TestPlaygroundCommand(t *testing.T) {
	t.Parallel()
	configDir, _, _ := layout(t, slowPlugin)
	app := t.TempDir()
	if err := os.WriteFile(filepath.Join(app, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	paramsFile := filepath.Join(t.TempDir(), "params.yaml")
	if err := os.WriteFile(paramsFile, []byte("- name: image.tag\n  string: v2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A free loopback port: taken, then released for the binary.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(binary, "playground", "--config", filepath.Join(configDir, "plugin.yaml"), "--app-dir", app,
		"--listen", addr, "--app-namespace", "team-a", "--parameters", paramsFile, "--logformat", "text")
	logs, exited := startCmd(t, cmd)
	var state struct {
		Plugin     struct{ Name string }
		Env        struct{ Namespace string }
		Parameters []struct{ Name, String string }
	}
	waitFor(t, "the playground to answer", func() bool {
		resp, err := http.Get("http://" + addr + "/api/state")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&state) == nil
	})
	if state.Plugin.Name != "slow" || state.Env.Namespace != "team-a" || len(state.Parameters) != 1 || state.Parameters[0].String != "v2" {
		t.Errorf("state = %+v", state)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, logs.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the playground did not exit after SIGTERM")
	}
	if !strings.Contains(logs.String(), "http://"+addr+"/") {
		t.Errorf("the log does not say where the page is:\n%s", logs.String())
	}
}

func TestPlaygroundListenChecks(t *testing.T) {
	t.Parallel()
	configDir, _, _ := layout(t, slowPlugin)
	for listen, want := range map[string]string{
		":7777":            "names no host",
		"example.com:7777": "must be an IP address or localhost",
	} {
		out, err := exec.Command(binary, "playground", "--config", filepath.Join(configDir, "plugin.yaml"), "--app-dir", t.TempDir(), "--listen", listen).CombinedOutput()
		if err == nil || !strings.Contains(string(out), want) {
			t.Errorf("--listen %s: %v\n%s", listen, err, out)
		}
	}
}
