package cmpserver

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/status"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
)

// The expected texts below are written out by hand from argocd-cmp-server's
// runCommand and its callers (v3.6.1): users paste these messages into search
// engines, so ours must start with exactly Argo CD's text. Anything we add comes
// after it.

func TestFormatArgvLikeArgo(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"kustomize", "build", "."}, `kustomize build .`},
		// Only arguments containing white space are quoted, Go-style.
		{[]string{"sh", "-c", `echo "x"`}, `sh -c "echo \"x\""`},
		{[]string{"sh", "-c", "set -e\nhelm template .\n"}, `sh -c "set -e\nhelm template .\n"`},
		// strconv.Quote escapes what is not printable, such as a no-break space.
		{[]string{"a\tb", "c\u00a0d"}, `"a\tb" "c\u00a0d"`},
		// An empty argument is shown as "", and quotes, $ or globs alone are not quoted.
		{[]string{"printf", "", "it's", "$HOME", "*.yaml", `"q"`}, `printf "" it's $HOME *.yaml "q"`},
	} {
		if got := formatArgv(tc.argv); got != tc.want {
			t.Errorf("formatArgv(%q) = %s, want %s", tc.argv, got, tc.want)
		}
	}
}

func TestCommandErrorTextsMatchArgo(t *testing.T) {
	t.Parallel()
	const head = "kind: ConfigManagementPlugin\nmetadata: {name: errs}\nspec:\n"
	for _, tc := range []struct {
		name   string
		spec   string
		rpc    string
		prefix string // Argo CD's full message
		exact  bool   // no detail of ours follows
	}{
		{
			name:   "generate exit with stderr",
			spec:   `  generate: {command: [sh, -c, 'echo "x" >&2; exit 3']}`,
			rpc:    "generate",
			prefix: "error generating manifests: `sh -c \"echo \\\"x\\\" >&2; exit 3\"` failed exit status 3: x",
			exact:  true,
		},
		{
			name:   "generate multi-line script, empty argument, no stderr",
			spec:   "  generate:\n    command: [sh, -c]\n    args: [\"test -n \\\"$1\\\"\\nexit 2\\n\", \"\", \"it's\"]",
			rpc:    "generate",
			prefix: "error generating manifests: `sh -c \"test -n \\\"$1\\\"\\nexit 2\\n\" \"\" it's` failed exit status 2",
			exact:  true,
		},
		{
			name:   "init",
			spec:   "  init: {command: [sh, -c, 'echo no init >&2; exit 5']}\n  generate: {command: [\"true\"]}",
			rpc:    "generate",
			prefix: "error generating manifests: `sh -c \"echo no init >&2; exit 5\"` failed exit status 5: no init",
			exact:  true,
		},
		{
			name:   "discovery find.command",
			spec:   "  generate: {command: [\"true\"]}\n  discover: {find: {command: [sh, -c, 'exit 1']}}",
			rpc:    "match",
			prefix: "match repository error: error running find command: `sh -c \"exit 1\"` failed exit status 1",
			exact:  true,
		},
		{
			name:   "dynamic parameters",
			spec:   "  generate: {command: [\"true\"]}\n  parameters: {dynamic: {command: [sh, -c, 'echo boom >&2; exit 1']}}",
			rpc:    "parameters",
			prefix: "get parameters announcement error: error executing dynamic parameter output command: `sh -c \"echo boom >&2; exit 1\"` failed exit status 1: boom",
			exact:  true,
		},
		{
			// Argo CD returns exec's own error; our detail names the command.
			name:   "start failure",
			spec:   "  generate: {command: [no-such-cmp-command, --flag]}",
			rpc:    "generate",
			prefix: `error generating manifests: exec: "no-such-cmp-command": executable file not found in $PATH`,
		},
		{
			name:   "start failure in discovery",
			spec:   "  generate: {command: [\"true\"]}\n  discover: {find: {command: [no-such-cmp-command]}}",
			rpc:    "match",
			prefix: `match repository error: error running find command: exec: "no-such-cmp-command": executable file not found in $PATH`,
		},
	} {
		ts := startServer(t, head+tc.spec+"\n", nil)
		c := ts.dial(t)
		ctx := ctxTimeout(t, 30*time.Second)
		req := client.Request{RepoRoot: writeTree(t, map[string]string{"f": "x"})}
		var err error
		switch tc.rpc {
		case "generate":
			_, err = c.Generate(ctx, req)
		case "match":
			_, err = c.Match(ctx, req)
		case "parameters":
			_, err = c.Parameters(ctx, req)
		}
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		msg := status.Convert(err).Message()
		if tc.exact && msg != tc.prefix {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, msg, tc.prefix)
		}
		if !tc.exact && (!strings.HasPrefix(msg, tc.prefix) || len(msg) == len(tc.prefix)) {
			t.Errorf("%s:\n got %s\nwant %s followed by our detail", tc.name, msg, tc.prefix)
		}
	}
}

// TestDeadlineErrorTextMatchesArgo: Argo CD SIGKILLs the command when the request
// deadline (minus its buffer) passes, so its message says "signal: killed". We
// send SIGTERM to the group first, but keep Argo CD's text and add after it why
// the command was stopped and how it really ended. (TestCommandTimeoutFlag covers
// --exec-timeout.)
func TestDeadlineErrorTextMatchesArgo(t *testing.T) {
	t.Parallel()
	plugin := "kind: ConfigManagementPlugin\nmetadata: {name: slow}\nspec:\n  generate: {command: [sleep, \"60\"]}\n"
	ts := startServer(t, plugin, func(o *Options) {
		o.Exec = DefaultExecOptions()
		// A wide buffer so a busy machine still delivers our error before the
		// client's own deadline turns it into DeadlineExceeded.
		o.Exec.DeadlineBuffer = time.Second
	})
	_, err := ts.dial(t).Generate(ctxTimeout(t, 3*time.Second), client.Request{RepoRoot: writeTree(t, map[string]string{"f": "x"})})
	want := "error generating manifests: `sleep 60` failed signal: killed (killed at the request deadline; the command ended with signal: terminated)"
	if msg := status.Convert(err).Message(); msg != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}
