package cmpserver

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
)

// TestBackgroundChildHoldingOutput: a command that exits but leaves a background
// child holding its stdout (or stderr) open. Argo CD waits for the pipe to close,
// that is for the child, up to the request deadline; we failed after
// --kill-grace with "WaitDelay expired". Now the output gets --output-grace to
// close, then what is left of the command is killed and the command's own exit
// status decides, with the output read so far.
func TestBackgroundChildHoldingOutput(t *testing.T) {
	t.Parallel()
	plugin := `kind: ConfigManagementPlugin
metadata: {name: bg}
spec:
  generate:
    command: [sh, -c]
    args:
    - |
      sleep 100 &
      echo $! > "$ARGOCD_ENV_PIDFILE"
      echo '{"kind":"ConfigMap","metadata":{"name":"ok-manifest"}}'
      if [ -n "$ARGOCD_ENV_FAIL" ]; then echo "it broke" >&2; exit 3; fi
`
	ts := startServer(t, plugin, nil)
	root := writeTree(t, map[string]string{"f": "x"})
	pidFile := filepath.Join(t.TempDir(), "pid")

	start := time.Now()
	got, err := ts.dial(t).Generate(ctxTimeout(t, 60*time.Second), client.Request{RepoRoot: root, Env: []string{"ARGOCD_ENV_PIDFILE=" + pidFile}})
	t.Logf("answered after %s: %q, %v", time.Since(start).Round(time.Millisecond), got, err)
	if err != nil || len(got) != 1 || !strings.Contains(got[0], "ok-manifest") {
		t.Fatalf("generate: %q, %v", got, err)
	}
	if child := readPID(t, pidFile); !waitUntil(10*time.Second, func() bool { return !processAlive(child) }) {
		t.Errorf("the background child %s outlived its command", child)
	}

	_, err = ts.dial(t).Generate(ctxTimeout(t, 60*time.Second), client.Request{RepoRoot: root, Env: []string{"ARGOCD_ENV_PIDFILE=" + pidFile, "ARGOCD_ENV_FAIL=1"}})
	wantErr(t, err, "failed exit status 3: it broke")
}
