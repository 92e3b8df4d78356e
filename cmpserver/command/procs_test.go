package command

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
)

// nobody drops the reports of a test's commands.
var nobody = ObserverFunc(func(Report) {})

// runSh runs script with sh -c as a plugin command would be, in a fresh app
// and request dir, with env added to the test's own; it returns the stdout.
func runSh(t *testing.T, ctx context.Context, script string, env ...string) (string, error) {
	t.Helper()
	r := NewRunner(DefaultOptions(), zap.NewNop(), nobody)
	dir := t.TempDir()
	out, err := r.Run(ctx, "generate", pluginconfig.Command{Command: []string{"sh", "-c"}, Args: []string{script}},
		Place{App: dir, Env: append(os.Environ(), env...), Spool: dir})
	if err != nil {
		return "", err
	}
	defer out.Close()
	b, err := out.Bytes()
	return string(b), err
}

func readPID(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

func timeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// escapeScript leaves a setsid escapee (it leaves the command's process
// group) and records its pid. In mode b the command then waits for the test
// and reports whether its escapee is still alive.
const escapeScript = `setsid sh -c 'echo $$ > "$PIDFILE"; exec sleep 1000' </dev/null >/dev/null 2>&1 &
while [ ! -s "$PIDFILE" ]; do sleep 0.01; done
if [ "$MODE" = b ]; then
  while [ ! -e "$GO" ]; do sleep 0.01; done
  kill -0 "$(cat "$PIDFILE")" && echo b-escapee-alive
else
  echo a
fi
`

// A process that left the command's process group outlived the command
// (only the group was killed). It is found by the command's
// CMP_SERVER_COMMAND_ID and killed when its command ends, while a concurrent
// command's escapee lives on until that command ends.
func TestSetsidEscapeeKilledWithItsCommandOnly(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	pidA, pidB, goB := filepath.Join(tmp, "a"), filepath.Join(tmp, "b"), filepath.Join(tmp, "go")
	type result struct {
		out string
		err error
	}
	doneB := make(chan result, 1)
	go func() {
		out, err := runSh(t, timeout(t, time.Minute), escapeScript, "MODE=b", "PIDFILE="+pidB, "GO="+goB)
		doneB <- result{out, err}
	}()
	if !servingtest.WaitUntil(20*time.Second, func() bool { fi, err := os.Stat(pidB); return err == nil && fi.Size() > 0 }) {
		t.Fatal("command b never started its escapee")
	}
	if out, err := runSh(t, timeout(t, time.Minute), escapeScript, "MODE=a", "PIDFILE="+pidA); err != nil || out != "a" {
		t.Fatalf("a: %q, %v", out, err)
	}
	escapeeA := readPID(t, pidA)
	if !servingtest.WaitUntil(10*time.Second, func() bool { return !servingtest.ProcessAlive(escapeeA) }) {
		t.Errorf("the escapee %s of a finished command is still alive", escapeeA)
	}
	if escapeeB := readPID(t, pidB); !servingtest.ProcessAlive(escapeeB) {
		t.Errorf("the escapee %s of the running command b was killed when a ended", escapeeB)
	}
	if err := os.WriteFile(goB, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res := <-doneB
	if res.err != nil || res.out != "b-escapee-alive" {
		t.Fatalf("b: %q, %v", res.out, res.err)
	}
	escapeeB := readPID(t, pidB)
	if !servingtest.WaitUntil(10*time.Second, func() bool { return !servingtest.ProcessAlive(escapeeB) }) {
		t.Errorf("the escapee %s of b is still alive after b ended", escapeeB)
	}
}

// A command that exits but leaves a background child holding its stdout
// open. Argo CD waits for the pipe to close, that is for the child, up to the
// request deadline; we failed after --kill-grace with "WaitDelay expired".
// Now the output gets --output-grace to close, then what is left of the
// command is killed and the command's own exit status decides, with the
// output read so far.
func TestBackgroundChildHoldingOutput(t *testing.T) {
	t.Parallel()
	const script = `sleep 100 &
echo $! > "$PIDFILE"
echo ok-manifest
if [ -n "$FAIL" ]; then echo "it broke" >&2; exit 3; fi
`
	pidFile := filepath.Join(t.TempDir(), "pid")
	start := time.Now()
	out, err := runSh(t, timeout(t, time.Minute), script, "PIDFILE="+pidFile)
	t.Logf("answered after %s: %q, %v", time.Since(start).Round(time.Millisecond), out, err)
	if err != nil || out != "ok-manifest" {
		t.Fatalf("generate: %q, %v", out, err)
	}
	if child := readPID(t, pidFile); !servingtest.WaitUntil(10*time.Second, func() bool { return !servingtest.ProcessAlive(child) }) {
		t.Errorf("the background child %s outlived its command", child)
	}
	if _, err = runSh(t, timeout(t, time.Minute), script, "PIDFILE="+pidFile, "FAIL=1"); err == nil || !strings.Contains(err.Error(), "failed exit status 3: it broke") {
		t.Errorf("got %v, want the command's own exit status and stderr", err)
	}
}
