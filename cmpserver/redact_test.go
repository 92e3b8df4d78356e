package cmpserver

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// The sidecar's Secret values (named by keys.EnvSecretEnv) in a command's
// stderr or stdout never reach the error Argo CD gets, the server's log or a
// local run's reports; the tag names the variable instead.

const (
	plantedToken = "planted-0f3a9c27e1d84b56-token"
	tokenVar     = "CMP_TEST_VAULT_TOKEN"
	tokenTag     = "[redacted " + tokenVar + "]"
)

func secretEnv() []string {
	return append(os.Environ(), tokenVar+"="+plantedToken, keys.EnvSecretEnv+"="+tokenVar)
}

func leakyPlugin(generate string) string {
	return "apiVersion: argoproj.io/v1alpha1\nkind: ConfigManagementPlugin\nmetadata: {name: leaky}\nspec:\n  generate:\n    command: [sh, -c, '" + generate + "']\n"
}

func TestSecretValuesAreRedacted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, generate string
		stderrCap      int64
		code           codes.Code
	}{
		// A tool that dumps its env, as set -x or a debug flag does.
		{"stderr of a failing command", `env >&2; echo "token is $` + tokenVar + `" >&2; exit 3`, 0, codes.Unknown},
		// Output that is no YAML, quoted by the split's error.
		{"stdout quoted by an error", `printf "a: b\n---x %s\n" "$` + tokenVar + `"`, 0, codes.Unknown},
		// The stderr cap falls inside the value: redacted before it is cut.
		{"stderr cut inside the value", `printf "%090d%s\n" 0 "$` + tokenVar + `" >&2; exit 1`, 100, codes.Unknown},
		// Stopped by the command timeout (Argo CD's code, Unknown; that a
		// status keeps its code is redact's TestError).
		{"timeout", `echo "$` + tokenVar + `" >&2; sleep 30`, 0, codes.Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			core, logs := observer.New(zap.DebugLevel)
			ts := startServer(t, leakyPlugin(tc.generate), func(o *Options) {
				o.Env, o.Logger = secretEnv(), zap.New(core)
				o.Exec.KillGrace = time.Second
				if tc.name == "timeout" {
					// Stopped by --exec-timeout, well before the client's
					// deadline: the server's answer is what arrives.
					o.Exec.Timeout = time.Second
				}
				if tc.stderrCap > 0 {
					o.Exec.MaxStderrBytes = tc.stderrCap
				}
			})
			_, err := ts.dial(t).Generate(ctxTimeout(t, 30*time.Second), client.Request{RepoRoot: writeTree(t, map[string]string{"app.yaml": "a: b\n"})})
			st := status.Convert(err)
			t.Logf("Argo CD would show: %s", st.Message())
			if err == nil || st.Code() != tc.code {
				t.Fatalf("err %v, want code %v", err, tc.code)
			}
			if !strings.Contains(st.Message(), "[redacted ") {
				t.Errorf("the value was not printed at all, so the test proves nothing: %s", st.Message())
			}
			for i := len(plantedToken); i >= 10; i-- {
				if strings.Contains(st.Message(), plantedToken[:i]) {
					t.Fatalf("the error carries %q of the value: %s", plantedToken[:i], st.Message())
				}
			}
			if n := metricValue(t, ts.srv.metrics, "cmp_server_redactions_total"); n < 1 {
				t.Errorf("cmp_server_redactions_total = %v, want at least 1", n)
			}
			// The server's own log: stderr is redacted as it is read. A
			// message quoting stdout is redacted on its way to the client and,
			// in cmp-server's log, by the log writer (cli; cmpserver/cli's
			// TestSecretValuesInNoOutput).
			if tc.name == "stdout quoted by an error" {
				return
			}
			for _, e := range logs.All() {
				if line := fmt.Sprint(e.Message, e.ContextMap()); strings.Contains(line, plantedToken) {
					t.Errorf("log line carries the value: %s", line)
				}
			}
		})
	}
}
