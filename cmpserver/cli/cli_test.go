package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/cmpserver/tracing/otlptest"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
)

// binary is cmd/cmp-server built once for the tests that run it as a process.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cmpbin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "cmp-server")
	out, err := exec.Command("go", "build", "-o", binary, "github.com/cmp-injector/cmp-injector/cmd/cmp-server").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const slowPlugin = `apiVersion: argoproj.io/v1alpha1
kind: ConfigManagementPlugin
metadata:
  name: slow
spec:
  generate:
    command: [sh, -c, 'touch "$ARGOCD_ENV_STARTED"; sleep 2; echo "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"drained\"}}"']
`

// layout makes a config dir, socket dir and work dir short enough for a socket.
func layout(t *testing.T, plugin string) (configDir, socketDir, workDir string) {
	t.Helper()
	base, err := os.MkdirTemp("", "cmp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	configDir = filepath.Join(base, "c")
	if err := os.MkdirAll(configDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(configDir, "plugin.yaml"), []byte(plugin), 0o644); err != nil {
		t.Fatal(err)
	}
	return configDir, filepath.Join(base, "s"), filepath.Join(base, "w")
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startCmd starts cmd with its stderr in a buffer the test may read while cmd
// runs; exited receives cmd's exit. If the test ends first, cmd is killed
// (after the test's own cleanups, which may stop it more gently).
func startCmd(t *testing.T, cmd *exec.Cmd) (logs *servingtest.SyncBuffer, exited <-chan error) {
	t.Helper()
	logs = &servingtest.SyncBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch := make(chan error, 1)
	go func() { ch <- cmd.Wait() }()
	// After Wait has returned, Kill signals nothing.
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return logs, ch
}

// startServer runs "cmp-server serve" on a layout, with extra flags, until the
// test ends, when it must exit 0 on SIGTERM (unless the test already ended it),
// and waits for socket. The server's log is in the failure message.
func startServer(t *testing.T, configDir, socketDir, workDir, socket string, args ...string) *exec.Cmd {
	t.Helper()
	srv := exec.Command(binary, append([]string{"serve", "--config-dir", configDir, "--socket-dir", socketDir, "--work-dir", workDir}, args...)...)
	logs, exited := startCmd(t, srv)
	t.Cleanup(func() {
		_ = srv.Process.Signal(syscall.SIGTERM)
		if err := <-exited; err != nil && !killedByTest(err) {
			t.Errorf("server exit: %v\n%s", err, logs.String())
		}
	})
	waitFor(t, "socket", func() bool { _, err := os.Stat(socket); return err == nil })
	return srv
}

// killedByTest is the exit of a server a test stopped with SIGKILL.
func killedByTest(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

func TestSIGTERMDrainsAndExitsZero(t *testing.T) {
	t.Parallel()
	configDir, socketDir, workDir := layout(t, slowPlugin)
	// No subcommand and a flag first: serves, as argocd-cmp-server does; the
	// Argo CD flag name --config-dir-path is accepted. Traces go to a real
	// OTLP receiver, and those still batched are sent before the exit.
	recv, err := otlptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Stop()
	cmd := exec.Command(binary, "--loglevel", "debug", "--config-dir-path", configDir, "--shutdown-grace", "20s", "--otlp-address", recv.Addr)
	cmd.Env = append(os.Environ(), "ARGOCD_PLUGINSOCKFILEPATH="+socketDir, "ARGOCD_CMP_WORKDIR="+workDir)
	logs, exited := startCmd(t, cmd)
	socket := filepath.Join(socketDir, "slow.sock")
	waitFor(t, "socket", func() bool { _, err := os.Stat(socket); return err == nil })

	started := filepath.Join(t.TempDir(), "started")
	repo := t.TempDir()
	if err := os.WriteFile(filepath.Join(repo, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	type result struct {
		manifests []string
		err       error
	}
	done := make(chan result, 1)
	go func() {
		m, err := c.Generate(ctx, client.Request{RepoRoot: repo, Env: []string{"ARGOCD_ENV_STARTED=" + started}})
		done <- result{m, err}
	}()
	waitFor(t, "generate to start", func() bool { _, err := os.Stat(started); return err == nil })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil || len(res.manifests) != 1 || !strings.Contains(res.manifests[0], "drained") {
		t.Fatalf("in-flight generate: %q, %v\nlogs:\n%s", res.manifests, res.err, logs.String())
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit: %v\nlogs:\n%s", err, logs.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("server did not exit after SIGTERM")
	}
	if _, err := os.Stat(socket); !os.IsNotExist(err) {
		t.Errorf("socket still present: %v", err)
	}
	names := map[string]bool{}
	for _, sp := range recv.Spans() {
		names[sp.Name] = true
	}
	for _, want := range []string{"plugin.ConfigManagementPluginService/GenerateManifest", "plugin.generateManifestGeneric", "plugin.runCommand"} {
		if !names[want] {
			t.Errorf("no span %q reached the collector by the exit: %v", want, names)
		}
	}
	for _, want := range []string{`"msg":"traces are sent to an OpenTelemetry collector"`, `"msg":"shutting down: draining in-flight requests"`, `"request_id"`, `"msg":"cmp-server stopped"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %s:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), started) {
		t.Error("an env value was logged")
	}
}

func TestInvalidConfigFailsWithOneMessage(t *testing.T) {
	t.Parallel()
	configDir, socketDir, workDir := layout(t, "kind: Plugin\nmetadata: {}\nspec:\n  paramters: {}\n")
	out, err := exec.Command(binary, "serve", "--config-dir", configDir, "--socket-dir", socketDir, "--work-dir", workDir).CombinedOutput()
	if err == nil {
		t.Fatalf("exit 0:\n%s", out)
	}
	s := string(out)
	if strings.Count(s, "invalid plugin configuration") != 1 || !strings.Contains(s, "kind should be ConfigManagementPlugin") ||
		!strings.Contains(s, "metadata.name should be non-empty") || !strings.Contains(s, "spec.generate.command should be non-empty") ||
		!strings.Contains(s, `unknown key \"spec.paramters\"`) {
		t.Errorf("output:\n%s", s)
	}
}

func TestCopy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dest := filepath.Join(dir, "cmp-server")
	out, err := exec.Command(binary, "copy", dest).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "to "+dest) {
		t.Fatalf("copy: %v\n%s", err, out)
	}
	fi, err := os.Stat(dest)
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("dest %v %v", fi, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("copy left extra files: %v", entries)
	}
	if out, err := exec.Command(dest, "version").Output(); err != nil || strings.TrimSpace(string(out)) == "" {
		t.Errorf("copied binary: %q %v", out, err)
	}
	if err := exec.Command(binary, "copy").Run(); err == nil {
		t.Error("copy without DEST succeeded")
	}
}

const echoPlugin = `apiVersion: argoproj.io/v1alpha1
kind: ConfigManagementPlugin
metadata:
  name: echo
spec:
  generate:
    command: [sh, -c, 'printf "kind: ConfigMap\napiVersion: v1\nmetadata:\n  name: %s\ndata:\n  env: \"%s\"\n  p: \"%s\"\n" "$ARGOCD_APP_NAME" "$ARGOCD_ENV_FOO" "$PARAM_VALUES_FILES_1"']
  discover:
    find:
      glob: "**/*.yaml"
  parameters:
    static:
    - name: values-files
      collectionType: array
`

func TestRunAndCallAgree(t *testing.T) {
	t.Parallel()
	configDir, socketDir, workDir := layout(t, echoPlugin)
	repo := t.TempDir()
	if err := os.MkdirAll(filepath.Join(repo, "apps", "guestbook"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "apps", "guestbook", "values.yaml"), []byte("a: b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	paramsFile := filepath.Join(t.TempDir(), "params.yaml")
	if err := os.WriteFile(paramsFile, []byte("- name: values-files\n  array: [a.yaml, b.yaml]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	common := []string{"--app-dir", filepath.Join(repo, "apps", "guestbook"), "--repo-root", repo, "--parameters", paramsFile, "--env", "FOO=bar-$ARGOCD_APP_NAME-$$"}
	wantYAML := "apiVersion: v1\ndata:\n  env: bar-guestbook-$\n  p: b.yaml\nkind: ConfigMap\nmetadata:\n  name: guestbook\n"
	run := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(binary, args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stderr.String())
		}
		return stdout.String()
	}
	plugin := filepath.Join(configDir, "plugin.yaml")
	if got := run(append([]string{"run", "generate", "--config", plugin}, common...)...); got != wantYAML {
		t.Errorf("run generate:\n%s", got)
	}
	if got := run(append([]string{"run", "match", "--config", plugin}, common...)...); got != "true\n" {
		t.Errorf("run match: %q", got)
	}
	if got := run(append([]string{"run", "parameters", "--config", plugin}, common...)...); !strings.Contains(got, `"collectionType": "array"`) {
		t.Errorf("run parameters: %s", got)
	}

	socket := filepath.Join(socketDir, "echo.sock")
	startServer(t, configDir, socketDir, workDir, socket)
	if got := run(append([]string{"call", "--socket", socket, "generate"}, common...)...); got != wantYAML {
		t.Errorf("call generate:\n%s", got)
	}
	if got := run("call", "--socket", socket, "check"); !strings.Contains(got, `"isDiscoveryConfigured": true`) {
		t.Errorf("call check: %s", got)
	}
	if got := run(append([]string{"call", "--socket", socket, "match"}, common...)...); got != "true\n" {
		t.Errorf("call match: %q", got)
	}
}

func TestUnknownCommand(t *testing.T) {
	var stderr bytes.Buffer
	if code := Main(context.Background(), []string{"bogus"}, nil, &stderr, &stderr); code != 2 || !strings.Contains(stderr.String(), "unknown command") {
		t.Errorf("code %d: %s", code, stderr.String())
	}
}

// --help, -h and help print usage on stdout and exit 0, for the program and
// every command (helm included, as cmd/cmp-server adds it); the program's help
// lists every command; a mistyped flag is reported once.
func TestHelpEverywhere(t *testing.T) {
	help := func(args ...string) (int, string, string) {
		return servingtest.Run(t, exec.Command(binary, args...))
	}
	names := []string{"helm"}
	for _, c := range Commands() {
		names = append(names, c.Name)
	}
	for _, flag := range []string{"--help", "-h", "help"} {
		code, out, stderr := help(flag)
		if code != 0 || stderr != "" || !strings.Contains(out, "Exit codes:") {
			t.Errorf("%s: exit %d, stderr %q\n%s", flag, code, stderr, out)
		}
		for _, n := range names {
			if !strings.Contains(out, "\n  "+n+" ") {
				t.Errorf("%s: help lacks %s\n%s", flag, n, out)
			}
		}
	}
	for _, n := range names {
		for _, args := range [][]string{{n, "--help"}, {n, "-h"}, {"help", n}} {
			code, out, stderr := help(args...)
			if code != 0 || stderr != "" || !strings.HasPrefix(out, "usage: cmp-server "+n) {
				t.Errorf("%v: exit %d, stderr %q, stdout %q", args, code, stderr, out)
			}
		}
	}
	code, out, stderr := help("run", "generate", "--confg", "x")
	if code != 2 || out != "" || strings.Count(stderr, "flag provided but not defined: -confg") != 1 {
		t.Errorf("mistyped flag: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

// call knows at once that nothing listens: no socket, or a stale one.
func TestCallFailsFastWithoutServer(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "call")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	for socket, want := range map[string]string{
		filepath.Join(dir, "missing.sock"): "no socket at",
		stale:                              "connection refused",
	} {
		start := time.Now()
		out, err := exec.Command(binary, "call", "--socket", socket, "check").CombinedOutput()
		if err == nil || !strings.Contains(string(out), want) || time.Since(start) > 30*time.Second {
			t.Errorf("%s: %v after %s\n%s", socket, err, time.Since(start), out)
		}
	}
}

const logEnvPlugin = `kind: ConfigManagementPlugin
metadata: {name: logenv}
spec:
  generate:
    command: [sh, -c]
    args:
    - |
      printf 'kind: ConfigMap\ndata: {level: "%s", format: "%s"}\n' "$ARGOCD_LOG_LEVEL" "$ARGOCD_LOG_FORMAT"
`

// TestLogFlagsReachCommands: --loglevel and --logformat accept what
// argocd-cmp-server accepts (logrus level names such as trace and WARN) and reach
// the plugin's commands as ARGOCD_LOG_LEVEL and ARGOCD_LOG_FORMAT, spelled as
// Argo CD exports them, both when serving and with run.
func TestLogFlagsReachCommands(t *testing.T) {
	t.Parallel()
	configDir, socketDir, workDir := layout(t, logEnvPlugin)
	repo := t.TempDir()
	if err := os.WriteFile(filepath.Join(repo, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(env []string, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(binary, args...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stderr.String())
		}
		return stdout.String()
	}
	want := func(level, format string) string {
		return "data:\n  format: " + format + "\n  level: " + level + "\nkind: ConfigMap\n"
	}
	plugin := filepath.Join(configDir, "plugin.yaml")
	if got := run(nil, "run", "generate", "--config", plugin, "--app-dir", repo, "--loglevel", "trace", "--logformat", "TEXT"); got != want("trace", "text") {
		t.Errorf("run --loglevel trace --logformat TEXT:\n%s", got)
	}
	// An empty --logformat is text in Argo CD, for the logs and the commands alike.
	if got := run(nil, "run", "generate", "--config", plugin, "--app-dir", repo, "--logformat="); got != want("info", "text") {
		t.Errorf("run --logformat=:\n%s", got)
	}
	// Argo CD's env defaults for the flags work the same way.
	if got := run([]string{"ARGOCD_CMP_SERVER_LOGLEVEL=WARN"}, "run", "generate", "--config", plugin, "--app-dir", repo); got != want("warning", "json") {
		t.Errorf("run with ARGOCD_CMP_SERVER_LOGLEVEL=WARN:\n%s", got)
	}

	socket := filepath.Join(socketDir, "logenv.sock")
	srv := exec.Command(binary, "--loglevel", "Warning", "--logformat", "text", "--config-dir-path", configDir, "--socket-dir", socketDir, "--work-dir", workDir)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Process.Signal(syscall.SIGTERM)
		_ = srv.Wait()
	})
	waitFor(t, "socket", func() bool { _, err := os.Stat(socket); return err == nil })
	if got := run(nil, "call", "--socket", socket, "generate", "--app-dir", repo); got != want("warning", "text") {
		t.Errorf("serve --loglevel Warning --logformat text:\n%s", got)
	}
}

// Values that cannot work are usage errors naming the flag; 0 means none.
func TestServeRejectsNegativeValues(t *testing.T) {
	t.Parallel()
	configDir, socketDir, workDir := layout(t, echoPlugin)
	out, err := exec.Command(binary, "serve", "--config-dir", configDir, "--socket-dir", socketDir, "--work-dir", workDir,
		"--max-files=-1", "--stream-idle-timeout=-1s", "--max-msg-size-mb=0").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"--max-files must not be negative (0 means none), got -1", "--stream-idle-timeout must not be negative", "--max-msg-size-mb must be at least 1"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// envPlugin announces, from its dynamic parameters command, what the env of
// the announcement held.
const envPlugin = `apiVersion: argoproj.io/v1alpha1
kind: ConfigManagementPlugin
metadata:
  name: env
spec:
  generate:
    command: [sh, -c, 'echo "{}"']
  parameters:
    dynamic:
      command: [sh, -c, 'echo "[{\"name\": \"app-${ARGOCD_APP_NAME}-ns-${ARGOCD_APP_NAMESPACE:-none}-kube-${KUBE_VERSION:-none}\"}]"']
`

// Argo CD's repo-server sends the parameters announcement a smaller env than
// a generation (no namespace, revision or KUBE_*): run parameters does too, so
// an author sees locally what the plugin sees in a cluster.
func TestRunParametersSendsArgoCDsSmallerEnv(t *testing.T) {
	t.Parallel()
	configDir, _, _ := layout(t, envPlugin)
	app := filepath.Join(t.TempDir(), "guestbook")
	if err := os.MkdirAll(app, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(app, "values.yaml"), []byte("a: b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(binary, "run", "parameters", "--config", filepath.Join(configDir, "plugin.yaml"),
		"--app-dir", app, "--app-namespace", "demo", "--kube-version", "1.34.0")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if want := "app-guestbook-ns-none-kube-none"; !strings.Contains(stdout.String(), want) {
		t.Errorf("the announcement's env: want %s in\n%s", want, stdout.String())
	}
}

// Argo CD's documentation says a CMP sidecar's ARGOCD_EXEC_TIMEOUT bounds
// each command (its server never reads it): ours does, as the default of
// --exec-timeout, and ARGOCD_EXEC_FATAL_TIMEOUT is --kill-grace's. A value
// that is not a duration stops the server at start, naming the variable.
func TestArgoExecTimeoutEnv(t *testing.T) {
	t.Parallel()
	configDir, _, _ := layout(t, `apiVersion: argoproj.io/v1alpha1
kind: ConfigManagementPlugin
metadata: {name: sleepy}
spec:
  generate:
    command: [sh, -c, 'trap "" TERM; sleep 30']
`)
	app := t.TempDir()
	if err := os.WriteFile(filepath.Join(app, "app.yaml"), []byte("a: b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Every command is bounded, so that a server that ignores the variables
	// fails the test instead of hanging it.
	bounded := func(argv ...string) *exec.Cmd {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		t.Cleanup(cancel)
		return exec.CommandContext(ctx, argv[0], argv[1:]...)
	}
	run := func(env ...string) (string, error) {
		cmd := bounded(binary, "run", "generate", "--config", filepath.Join(configDir, "plugin.yaml"), "--app-dir", app)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("ARGOCD_EXEC_TIMEOUT=1s", "ARGOCD_EXEC_FATAL_TIMEOUT=500ms")
	if err == nil || !strings.Contains(out, "killed after the command timeout of 1s") || !strings.Contains(out, "signal: killed") {
		t.Errorf("a command ignoring SIGTERM under ARGOCD_EXEC_TIMEOUT=1s: %v\n%s", err, out)
	}
	help, _ := exec.Command("env", "ARGOCD_EXEC_TIMEOUT=1s", "ARGOCD_EXEC_FATAL_TIMEOUT=500ms", binary, "run", "--help").CombinedOutput()
	for _, want := range []string{"(env ARGOCD_EXEC_TIMEOUT) (default 1s)", "(env ARGOCD_EXEC_FATAL_TIMEOUT) (default 500ms)"} {
		if !strings.Contains(string(help), want) {
			t.Errorf("run --help lacks %q:\n%s", want, help)
		}
	}
	for _, env := range []string{"ARGOCD_EXEC_TIMEOUT=90", "ARGOCD_EXEC_FATAL_TIMEOUT=soon"} {
		out, err := run(env)
		name, _, _ := strings.Cut(env, "=")
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(out, name+"=") || !strings.Contains(out, "is not a duration") {
			t.Errorf("%s: %v\n%s", env, err, out)
		}
	}
	_, socketDir, workDir := layout(t, echoPlugin)
	out2, err := bounded("env", "ARGOCD_EXEC_TIMEOUT=later", binary, "serve", "--config-dir", configDir, "--socket-dir", socketDir, "--work-dir", workDir).CombinedOutput()
	if err == nil || !strings.Contains(string(out2), "ARGOCD_EXEC_TIMEOUT=\"later\" is not a duration") {
		t.Errorf("serve with a bad ARGOCD_EXEC_TIMEOUT: %v\n%s", err, out2)
	}
}

// TestRenderCacheSettings: serve reads the render cache's env (the injector's
// way to set it), refuses an unreadable value and a cache on a sidecar with
// Secret env, and says at start that the cache is on.
func TestRenderCacheSettings(t *testing.T) {
	t.Parallel()
	configDir, socketDir, workDir := layout(t, echoPlugin)
	serve := func(timeout time.Duration, env ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary, "serve", "--config-dir", configDir, "--socket-dir", socketDir, "--work-dir", workDir)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for env, want := range map[string]string{
		keys.EnvRenderCacheSize + "=64Mi":                 `CMP_SERVER_RENDER_CACHE_SIZE="64Mi" is not a number of bytes`,
		keys.EnvRenderCacheTTL + "=long":                  `CMP_SERVER_RENDER_CACHE_TTL="long" is not a duration`,
		keys.EnvRenderCacheRevisionIndependent + "=maybe": `CMP_SERVER_RENDER_CACHE_REVISION_INDEPENDENT="maybe" is not true or false`,
		keys.EnvRenderCacheSize + "=-1":                   "--render-cache-size must not be negative",
	} {
		out, err := serve(20*time.Second, env)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(out, want) {
			t.Errorf("%s: %v, want exit 2 and %q:\n%s", env, err, want, out)
		}
	}
	out, err := serve(20*time.Second, keys.EnvRenderCacheSize+"=1048576", keys.EnvSecretEnv+"=TOKEN", "TOKEN=s.0123456789abcdef")
	if err == nil || !strings.Contains(out, "takes env from Secrets (TOKEN)") || strings.Contains(out, "s.0123456789abcdef") {
		t.Errorf("a cache on a sidecar with Secret env: %v\n%s", err, out)
	}
	// Allowed, it starts (and runs until the timeout ends it).
	out, _ = serve(3*time.Second, keys.EnvRenderCacheSize+"=1048576", keys.EnvRenderCacheAllowSecrets+"=true", keys.EnvSecretEnv+"=TOKEN", "TOKEN=s.0123456789abcdef")
	if !strings.Contains(out, "render cache on") || !strings.Contains(out, `"max_bytes":1048576`) {
		t.Errorf("the cache allowed with Secret env did not start:\n%s", out)
	}
}
