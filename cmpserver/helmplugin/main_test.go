package helmplugin

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/params"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

func TestMainHelp(t *testing.T) {
	dir := chartDir(t, "echo")
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"generate", "--help"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, out, stderr := runMain(t, dir, nil, args...)
			if code != 0 || !strings.Contains(out, "usage: cmp-server helm generate|parameters") || !strings.Contains(out, "ARGOCD_APP_PARAMETERS") || stderr != "" {
				t.Errorf("exit %d, stdout %q, stderr %q", code, out, stderr)
			}
		})
	}
}

// runMain runs runCommand as cmp-server would: env from the process, the chart as cwd.
func runMain(t *testing.T, dir string, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	return runMainFor(t, testTimeout, dir, env, args...)
}

// runMainFor is runMain with cmp-server's context ending after timeout.
func runMainFor(t *testing.T, timeout time.Duration, dir string, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	t.Chdir(dir)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	p := serving.Program{Name: "cmp-server", Commands: []serving.Command{Command}}
	code := p.Main(ctx, append([]string{"helm"}, args...), serving.IO{Stdout: &stdout, Stderr: &stderr})
	return code, stdout.String(), stderr.String()
}

func TestMainGenerate(t *testing.T) {
	dir := chartDir(t, "echo")
	env := withParams(t, baseEnv(t), []params.AppParameter{{Name: "helm-parameters", Map: map[string]string{"x": "a,b"}}})
	want, _, err := runPlugin(t, generateManifests, dir, "", env)
	if err != nil {
		t.Fatal(err)
	}
	code, got, stderr := runMain(t, dir, env, "generate")
	if code != 0 || got != want {
		t.Fatalf("exit %d, stderr %q, output equal to Generate: %v", code, stderr, got == want)
	}
}

func TestMainParametersWithRepoRootFlag(t *testing.T) {
	charts := chartDir(t, "")
	env := withParams(t, baseEnv(t), []params.AppParameter{{Name: "values-files", Array: []string{"../typed/values.yaml"}}})
	code, out, stderr := runMain(t, chartDir(t, "echo"), env, "parameters", "--repo-root", charts)
	if code != 0 || !strings.Contains(out, `"ingress.enabled": "false"`) {
		t.Fatalf("exit %d, stderr %q, out %s", code, stderr, out)
	}
}

func TestMainErrors(t *testing.T) {
	env := baseEnv(t)
	env[keys.EnvAppParameters] = ""
	cases := []struct {
		name     string
		dir      string
		args     []string
		code     int
		inStderr string
	}{
		{"no action", "echo", nil, 2, "an action is required"},
		{"unknown action", "echo", []string{"install"}, 2, `unknown action "install"`},
		{"stray argument", "echo", []string{"generate", "extra"}, 2, "unexpected arguments"},
		{"bad flag", "echo", []string{"generate", "--nope"}, 2, "flag provided but not defined"},
		{"broken chart", "broken", []string{"generate"}, 1, "Error: parse error at (broken/templates/bad.yaml:5)"},
		{"bad parameter", "echo", []string{"generate"}, 1, "cmp-server helm: " + keys.EnvAppParameters},
		// Outside a chart (here: the charts directory, which holds links and
		// files of its own) the first thing said is that there is no chart.
		{"not a chart", "", []string{"generate"}, 1, "cmp-server helm: no Chart.yaml in "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := env
			if tc.name == "bad parameter" {
				e = map[string]string{keys.EnvAppParameters: "{"}
				for k, v := range env {
					if k != keys.EnvAppParameters {
						e[k] = v
					}
				}
			}
			code, _, stderr := runMain(t, chartDir(t, tc.dir), e, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.inStderr) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)", code, tc.code, stderr, tc.inStderr)
			}
		})
	}
}

// TestMainReportsHelmsOutcome: what a helm run leaves the user with, told by
// a stand-in helm: its manifests on stdout, its warnings on a success on
// stderr (trimmed), and on a failure its own message, unprefixed, with its
// exit code; a silent failure says the status, and a helm stopped by the
// context says so.
func TestMainReportsHelmsOutcome(t *testing.T) {
	for name, tc := range map[string]struct {
		script  string
		timeout time.Duration
		code    int
		stdout  string
		stderr  string
	}{
		"success with warnings": {script: "echo 'kind: A'\necho '  WARNING: deprecated chart  ' >&2\n",
			stdout: "kind: A\n", stderr: "WARNING: deprecated chart\n"},
		"a quiet success": {script: "echo 'kind: A'\n", stdout: "kind: A\n"},
		"failure": {script: "echo 'kind: A'\necho 'Error: bad chart' >&2\nexit 3\n",
			code: 3, stdout: "kind: A\n", stderr: "Error: bad chart\n"},
		"silent failure": {script: "exit 4\n", code: 4, stderr: "helm exited with status 4\n"},
		"stopped":        {script: "exec /bin/sleep 60\n", timeout: 300 * time.Millisecond, code: 1, stderr: "helm was stopped: context deadline exceeded\n"},
		"no helm":        {code: 1, stderr: "cmp-server helm: helm not found on PATH ({bin})\n"},
	} {
		t.Run(name, func(t *testing.T) {
			bin := t.TempDir()
			if tc.script != "" {
				if err := os.WriteFile(filepath.Join(bin, "helm"), []byte("#!/bin/sh\n"+tc.script), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			env := baseEnv(t)
			env["PATH"] = bin
			env[keys.EnvAppParameters] = ""
			timeout := tc.timeout
			if timeout == 0 {
				timeout = testTimeout
			}
			code, stdout, stderr := runMainFor(t, timeout, chartDir(t, "echo"), env, "generate")
			want := strings.ReplaceAll(tc.stderr, "{bin}", bin)
			if code != tc.code || stdout != tc.stdout || stderr != want {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr %q", code, stdout, stderr, tc.code, tc.stdout, want)
			}
		})
	}
}
