package toolrun

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// tool writes an executable script named name into a new directory.
func tool(t *testing.T, name, script string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestRun(t *testing.T) {
	ctx := context.Background()
	describe := func(msg string) string { return "said: " + msg }
	t.Run("output and stderr of a success", func(t *testing.T) {
		dir := tool(t, "t", `echo out; echo note >&2; pwd`)
		out, stderr, err := Run(ctx, "t", nil, dir, []string{"PATH=/nowhere", "PATH=" + dir + ":/bin"}, describe)
		if err != nil || string(out) != "out\n"+dir+"\n" || string(stderr) != "note\n" {
			t.Errorf("out %q stderr %q err %v", out, stderr, err)
		}
	})
	t.Run("a failure is the tool's message and exit code", func(t *testing.T) {
		dir := tool(t, "t", `echo "  bad input" >&2; exit 3`)
		_, _, err := Run(ctx, "t", nil, dir, []string{"PATH=" + dir + ":/bin"}, describe)
		var exit *serving.ExitError
		if !errors.As(err, &exit) || exit.Code != 3 || err.Error() != "said: bad input" {
			t.Errorf("err %v, want exit 3 with %q", err, "said: bad input")
		}
	})
	t.Run("a silent failure says the status", func(t *testing.T) {
		dir := tool(t, "t", `exit 4`)
		_, _, err := Run(ctx, "t", nil, dir, []string{"PATH=" + dir}, describe)
		if err == nil || err.Error() != "said: t exited with status 4" {
			t.Errorf("err %v", err)
		}
	})
	t.Run("a tool stopped by the context says so", func(t *testing.T) {
		dir := tool(t, "t", `exec /bin/sleep 60`)
		ctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, _, err := Run(ctx, "t", nil, dir, []string{"PATH=" + dir}, describe)
		var exit *serving.ExitError
		if !errors.As(err, &exit) || exit.Code != 1 || err.Error() != "said: t was stopped: context deadline exceeded" {
			t.Errorf("err %v, want exit 1 saying it was stopped", err)
		}
	})
	t.Run("relative PATH entries are not searched", func(t *testing.T) {
		dir := tool(t, "t", `exit 0`)
		t.Chdir(filepath.Dir(dir))
		_, _, err := Run(ctx, "t", nil, dir, []string{"PATH=" + filepath.Base(dir)}, describe)
		if err == nil || !strings.Contains(err.Error(), "t not found on PATH") {
			t.Errorf("err %v, want not found", err)
		}
	})
}

// TestStream: stdout reaches the writer, what was written before a failure
// included, and stderr is returned or is the error's text as with Run.
func TestStream(t *testing.T) {
	ctx := context.Background()
	describe := func(msg string) string { return msg }
	dir := tool(t, "t", `echo out; echo "  note  " >&2; [ "$1" = fail ] && exit 5; exit 0`)
	var out bytes.Buffer
	stderr, err := Stream(ctx, "t", nil, dir, []string{"PATH=" + dir}, &out, describe)
	if err != nil || out.String() != "out\n" || string(stderr) != "  note  \n" {
		t.Errorf("out %q stderr %q err %v", out.String(), stderr, err)
	}
	out.Reset()
	stderr, err = Stream(ctx, "t", []string{"fail"}, dir, []string{"PATH=" + dir}, &out, describe)
	var exit *serving.ExitError
	if !errors.As(err, &exit) || exit.Code != 5 || err.Error() != "note" || stderr != nil || out.String() != "out\n" {
		t.Errorf("out %q stderr %q err %v, want exit 5 saying note after out", out.String(), stderr, err)
	}
}

func TestGenerateAction(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("ARGOCD_APP_PARAMETERS", `[{"name":"a","string":"b"}]`)
	ps, got, err := GenerateAction(serving.NewFlagSet("cmp-server x", "generate"), []string{"generate"})
	if err != nil || got != dir || len(ps) != 1 || ps[0].Name != "a" {
		t.Errorf("params %+v dir %q err %v", ps, got, err)
	}
	for args, want := range map[string]string{"": "an action is required: generate", "parameters": `unknown action "parameters": want generate`} {
		var argv []string
		if args != "" {
			argv = []string{args}
		}
		if _, _, err := GenerateAction(serving.NewFlagSet("cmp-server x", "generate"), argv); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("args %q: err %v, want %q", args, err, want)
		}
	}
	t.Setenv("ARGOCD_APP_PARAMETERS", `{"name":"a"}`)
	if _, _, err := GenerateAction(serving.NewFlagSet("cmp-server x", "generate"), []string{"generate"}); err == nil {
		t.Error("parameters that are no list were accepted")
	}
}

func TestFind(t *testing.T) {
	dir := tool(t, "kustomize-v1", `exit 0`)
	got, err := Find("kustomize-v1", []string{"PATH=/nowhere:" + dir, "HOME=/x"})
	if err != nil || got != filepath.Join(dir, "kustomize-v1") {
		t.Errorf("Find = %q %v", got, err)
	}
	if _, err := Find("kustomize-v2", []string{"PATH=" + dir}); err == nil || err.Error() != "kustomize-v2 not found on PATH ("+dir+")" {
		t.Errorf("err %v", err)
	}
}
