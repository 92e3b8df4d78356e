package jsonnetplugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// waitDelay bounds how long jsonnet's pipes are drained after it is killed.
const waitDelay = 5 * time.Second

// generate runs jsonnet with argv in dir and env and prints each manifest of
// its result as one JSON line. jsonnet's stderr is passed on; when it fails,
// its message is the error text the user reads and its exit code is ours.
func generate(ctx context.Context, argv []string, dir string, env []string, stdio serving.IO) error {
	bin, err := lookPath("jsonnet", env)
	if err != nil {
		return err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, argv...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = waitDelay
	err = cmd.Run()
	msg := strings.TrimSpace(stderr.String())
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code := exit.ExitCode()
		if code <= 0 {
			code = 1 // killed by a signal, e.g. the context's deadline
		}
		if msg == "" {
			msg = fmt.Sprintf("jsonnet exited with status %d", code)
			if ctx.Err() != nil {
				msg = "jsonnet was stopped: " + ctx.Err().Error()
			}
		}
		return &serving.ExitError{Code: code, Err: errors.New(msg)}
	case err != nil:
		return fmt.Errorf("running jsonnet: %w", err)
	}
	if msg != "" {
		// std.trace and warnings: shown, not fatal.
		fmt.Fprintln(stdio.Stderr, msg)
	}
	docs, err := manifests(stdout.Bytes())
	if err != nil {
		return err
	}
	for _, d := range docs {
		var line bytes.Buffer
		if err := json.Compact(&line, d); err != nil {
			return err
		}
		line.WriteByte('\n')
		if _, err := stdio.Stdout.Write(line.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// lookPath finds an executable in the PATH of the plugin env; relative PATH
// entries are skipped, since they would resolve inside the user's repository.
func lookPath(name string, env []string) (string, error) {
	var pathList string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathList = v // the last one wins, as with exec
		}
	}
	for _, dir := range filepath.SplitList(pathList) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if _, err := exec.LookPath(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found on PATH (%s)", name, pathList)
}
