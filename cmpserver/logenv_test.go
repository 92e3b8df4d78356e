package cmpserver

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
)

// logEnvPlugin prints what its command sees in ARGOCD_LOG_LEVEL and
// ARGOCD_LOG_FORMAT.
const logEnvPlugin = `kind: ConfigManagementPlugin
metadata: {name: logenv}
spec:
  generate:
    command: [sh, -c]
    args:
    - |
      printf '{"kind":"ConfigMap","data":{"level":"%s","format":"%s"}}' "$ARGOCD_LOG_LEVEL" "$ARGOCD_LOG_FORMAT"
`

// generatedLogEnv runs one generate and returns the level and format the command saw.
func generatedLogEnv(t *testing.T, ts *testServer, env ...string) (level, format string) {
	t.Helper()
	got, err := ts.dial(t).Generate(ctxTimeout(t, 30*time.Second), client.Request{RepoRoot: writeTree(t, map[string]string{"f": "x"}), Env: env})
	if err != nil || len(got) != 1 {
		t.Fatalf("generate: %q, %v", got, err)
	}
	var cm struct{ Data map[string]string }
	if err := json.Unmarshal([]byte(got[0]), &cm); err != nil {
		t.Fatal(err)
	}
	return cm.Data["level"], cm.Data["format"]
}

// TestCommandsSeeArgoLogEnv: argocd-cmp-server puts its log level and format
// into its own env (ARGOCD_LOG_LEVEL, ARGOCD_LOG_FORMAT), so every plugin command
// inherits them; the request env, which comes later, can still override them.
func TestCommandsSeeArgoLogEnv(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		level, format       string
		env                 []string
		wantLevel, wantForm string
	}{
		{"", "", nil, "info", "json"}, // Argo CD's flag defaults
		{"WARN", "Text", nil, "warning", "text"},
		{"trace", "json", nil, "trace", "json"},
		{"info", "json", []string{"ARGOCD_LOG_LEVEL=debug"}, "debug", "json"},
	} {
		ts := startServer(t, logEnvPlugin, func(o *Options) { o.LogLevel, o.LogFormat = tc.level, tc.format })
		level, format := generatedLogEnv(t, ts, tc.env...)
		if level != tc.wantLevel || format != tc.wantForm {
			t.Errorf("level %q format %q env %q: command saw %q, %q; want %q, %q", tc.level, tc.format, tc.env, level, format, tc.wantLevel, tc.wantForm)
		}
	}
	p, _, err := pluginconfig.Parse([]byte(logEnvPlugin))
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	o.Plugin, o.SocketDir, o.WorkDir, o.LogLevel = p, t.TempDir(), t.TempDir(), "verbose"
	if _, err := New(o); err == nil {
		t.Error("New accepted log level verbose")
	}
}

// TestArgoLogEnvReplacesSidecarEnv: Argo CD's os.Setenv replaces values the
// sidecar container was given, so ours must too. Not parallel: it sets the
// process env.
func TestArgoLogEnvReplacesSidecarEnv(t *testing.T) {
	t.Setenv("ARGOCD_LOG_LEVEL", "panic")
	t.Setenv("ARGOCD_LOG_FORMAT", "xml")
	ts := startServer(t, logEnvPlugin, func(o *Options) { o.LogLevel, o.LogFormat = "debug", "text" })
	if level, format := generatedLogEnv(t, ts); level != "debug" || format != "text" {
		t.Errorf("command saw %q, %q; want the server's debug, text", level, format)
	}
}
