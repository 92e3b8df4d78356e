package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
)

// TestRunWatch: `run --watch` prints once at start, again after the
// plugin.yaml changes, again after a file of the app changes, keeps watching
// through a broken plugin.yaml, and exits 0 on SIGINT.
func TestRunWatch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	config := filepath.Join(dir, "plugin.yaml")
	app := filepath.Join(dir, "app")
	plugin := func(prefix string) string {
		return "apiVersion: argoproj.io/v1alpha1\nkind: ConfigManagementPlugin\nmetadata: {name: w}\nspec:\n  generate:\n    command: [sh, -c, 'printf \"kind: ConfigMap\\napiVersion: v1\\nmetadata: {name: " + prefix + "-%s}\\n\" \"$(cat word)\"']\n"
	}
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(config, plugin("a"))
	write(filepath.Join(app, "word"), "one")
	var stdout, stderr servingtest.SyncBuffer
	cmd := exec.Command(binary, "run", "generate", "--watch", "--watch-interval", "50ms", "--config", config, "--app-dir", app)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	wait := func(what string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(stdout.String(), what) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in output:\n%s\nstderr:\n%s", what, stdout.String(), stderr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	wait("name: a-one")
	write(config, plugin("b"))
	wait("name: b-one")
	write(filepath.Join(app, "word"), "two")
	wait("name: b-two")
	write(config, "kind: ConfigManagementPlugin\nmetadata: {name: w}\nspec: {}\n")
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stderr.String(), "spec.generate.command should be non-empty") {
		if time.Now().After(deadline) {
			t.Fatalf("broken plugin.yaml not reported:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	write(config, plugin("c"))
	wait("name: c-two")
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGINT: %v\n%s", err, stderr.String())
	}
}
