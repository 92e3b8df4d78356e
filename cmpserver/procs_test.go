package cmpserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
)

// escapePlugin leaves a setsid escapee (it leaves the command's process group)
// and records its pid. In mode b the command then waits for the test and
// reports whether its escapee is still alive.
const escapePlugin = `kind: ConfigManagementPlugin
metadata: {name: escape}
spec:
  generate:
    command: [sh, -c]
    args:
    - |
      setsid sh -c 'echo $$ > "$ARGOCD_ENV_PIDFILE"; exec sleep 1000' </dev/null >/dev/null 2>&1 &
      while [ ! -s "$ARGOCD_ENV_PIDFILE" ]; do sleep 0.01; done
      if [ "$ARGOCD_ENV_MODE" = b ]; then
        while [ ! -e "$ARGOCD_ENV_GO" ]; do sleep 0.01; done
        kill -0 "$(cat "$ARGOCD_ENV_PIDFILE")" && echo '{"kind":"ConfigMap","metadata":{"name":"b-escapee-alive"}}'
      else
        echo '{"kind":"ConfigMap","metadata":{"name":"a"}}'
      fi
`

func readPID(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// TestSetsidEscapeeKilledWithItsCommandOnly: a process that left the command's
// process group outlived the command (only the group was killed). It is now
// found by the command's CMP_SERVER_COMMAND_ID and killed when its command ends,
// while a concurrent command's escapee lives on until that command ends.
func TestSetsidEscapeeKilledWithItsCommandOnly(t *testing.T) {
	t.Parallel()
	ts := startServer(t, escapePlugin, nil)
	root := writeTree(t, map[string]string{"f": "x"})
	tmp := t.TempDir()
	pidA, pidB, goB := filepath.Join(tmp, "a"), filepath.Join(tmp, "b"), filepath.Join(tmp, "go")

	type result struct {
		manifests []string
		err       error
	}
	doneB := make(chan result, 1)
	go func() {
		c, err := client.Dial(ctxTimeout(t, 10*time.Second), ts.socket)
		if err != nil {
			doneB <- result{nil, err}
			return
		}
		defer c.Close()
		m, err := c.Generate(ctxTimeout(t, 60*time.Second), client.Request{RepoRoot: root,
			Env: []string{"ARGOCD_ENV_MODE=b", "ARGOCD_ENV_PIDFILE=" + pidB, "ARGOCD_ENV_GO=" + goB}})
		doneB <- result{m, err}
	}()
	if !waitUntil(20*time.Second, func() bool { fi, err := os.Stat(pidB); return err == nil && fi.Size() > 0 }) {
		t.Fatal("command b never started its escapee")
	}

	got, err := ts.dial(t).Generate(ctxTimeout(t, 60*time.Second), client.Request{RepoRoot: root,
		Env: []string{"ARGOCD_ENV_MODE=a", "ARGOCD_ENV_PIDFILE=" + pidA}})
	if err != nil || len(got) != 1 {
		t.Fatalf("a: %q, %v", got, err)
	}
	escapeeA := readPID(t, pidA)
	if !waitUntil(10*time.Second, func() bool { return !processAlive(escapeeA) }) {
		t.Errorf("the escapee %s of a finished command is still alive", escapeeA)
	}
	if escapeeB := readPID(t, pidB); !processAlive(escapeeB) {
		t.Errorf("the escapee %s of the running command b was killed when a ended", escapeeB)
	}

	if err := os.WriteFile(goB, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res := <-doneB
	if res.err != nil || len(res.manifests) != 1 || !strings.Contains(res.manifests[0], "b-escapee-alive") {
		t.Fatalf("b: %q, %v", res.manifests, res.err)
	}
	escapeeB := readPID(t, pidB)
	if !waitUntil(10*time.Second, func() bool { return !processAlive(escapeeB) }) {
		t.Errorf("the escapee %s of b is still alive after b ended", escapeeB)
	}
}
