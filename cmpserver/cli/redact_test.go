package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// TestSecretValuesInNoOutput runs the built cmp-server as a sidecar's is run:
// a Secret's value in its env, named by the injector's keys.EnvSecretEnv. A
// plugin that prints it (stderr of a failed command, stdout quoted by an
// error) is answered with a tag, and the value is in no output: serve's log
// (at debug), call's error, run's error.
func TestSecretValuesInNoOutput(t *testing.T) {
	t.Parallel()
	const (
		value = "planted-7c1e5a90b2d34f68"
		name  = "VAULT_TOKEN"
	)
	plugin := `apiVersion: argoproj.io/v1alpha1
kind: ConfigManagementPlugin
metadata: {name: leaky}
spec:
  init:
    command: [sh, -c, 'echo "init sees $VAULT_TOKEN" >&2']
  generate:
    command: [sh, -c, 'printf "a: b\n---x %s\n" "$VAULT_TOKEN"; test -f fail && { set -x; env >&2; exit 3; }; true']
`
	configDir, socketDir, workDir := layout(t, plugin)
	env := append(os.Environ(), name+"="+value, keys.EnvSecretEnv+"=VAULT_*")
	repo := t.TempDir()
	if err := os.WriteFile(filepath.Join(repo, "fail"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(socketDir, "leaky.sock")
	srv := exec.Command(binary, "serve", "--config-dir", configDir, "--socket-dir", socketDir, "--work-dir", workDir, "--loglevel", "debug")
	srv.Env = env
	logs, exited := startCmd(t, srv)
	waitFor(t, "socket", func() bool { _, err := os.Stat(socket); return err == nil })

	outputs := map[string]string{}
	run := func(what string, args ...string) {
		var out bytes.Buffer
		cmd := exec.Command(binary, args...)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, &out, &out
		if err := cmd.Run(); err == nil {
			t.Errorf("%s succeeded: %s", what, out.String())
		}
		outputs[what] = out.String()
	}
	// Without the fail file the command succeeds and stdout fails the split;
	// with it, the command fails with its env on stderr.
	empty := t.TempDir()
	if err := os.WriteFile(filepath.Join(empty, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	run("call (stdout quoted)", "call", "--socket", socket, "generate", "--app-dir", empty)
	run("call (stderr)", "call", "--socket", socket, "generate", "--app-dir", repo)
	run("run (stderr)", "run", "generate", "--config", filepath.Join(configDir, "plugin.yaml"), "--app-dir", repo, "--loglevel", "debug")
	run("run (stdout quoted)", "run", "generate", "--config", filepath.Join(configDir, "plugin.yaml"), "--app-dir", empty, "--loglevel", "debug")
	_ = srv.Process.Signal(os.Interrupt)
	<-exited
	outputs["serve's log"] = logs.String()
	for what, out := range outputs {
		t.Logf("%s:\n%s", what, out)
		if strings.Contains(out, value) {
			t.Errorf("%s carries the value", what)
		}
		if !strings.Contains(out, "[redacted "+name+"]") {
			t.Errorf("%s has no tag: the value was never printed there, so this proves nothing", what)
		}
	}
	if !strings.Contains(outputs["serve's log"], `"names":["VAULT_TOKEN"]`) {
		t.Errorf("serve does not say which variables it redacts")
	}
}
