// Package toolrun runs the tool of a built-in plugin (jsonnet, sops) the way
// each of them needs: found on the plugin env's PATH, its output captured,
// and on failure its own message as the error text with its exit code.
package toolrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// waitDelay bounds how long a tool's pipes are drained after it is killed.
const waitDelay = 5 * time.Second

// Run runs tool (a name looked up on env's PATH) with args in dir and env,
// and returns its stdout and its stderr. When it fails, the error is an
// *serving.ExitError with the tool's exit code whose text is describe's
// wording of the tool's stderr (or of why it stopped).
func Run(ctx context.Context, tool string, args []string, dir string, env []string, describe func(msg string) string) (stdout, stderr []byte, err error) {
	bin, err := lookPath(tool, env)
	if err != nil {
		return nil, nil, err
	}
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.WaitDelay = waitDelay
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code := exit.ExitCode()
		if code <= 0 {
			code = 1 // killed by a signal, e.g. the context's deadline
		}
		msg := strings.TrimSpace(errOut.String())
		if msg == "" {
			msg = fmt.Sprintf("%s exited with status %d", tool, code)
			if ctx.Err() != nil {
				msg = tool + " was stopped: " + ctx.Err().Error()
			}
		}
		return nil, nil, &serving.ExitError{Code: code, Err: errors.New(describe(msg))}
	case err != nil:
		return nil, nil, fmt.Errorf("running %s: %w", tool, err)
	}
	return out.Bytes(), errOut.Bytes(), nil
}

// lookPath finds an executable in the PATH of the plugin env rather than of
// this process; relative PATH entries are skipped, since they would resolve
// inside the user's repository.
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
