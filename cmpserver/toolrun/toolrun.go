// Package toolrun runs the tool of a built-in plugin (helm, jsonnet, kustomize, sops) the
// way each of them needs: found on the plugin env's PATH, its output captured
// or streamed, and on failure its own message as the error text with its exit
// code.
package toolrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
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
	var out bytes.Buffer
	stderr, err = Stream(ctx, tool, args, dir, env, &out, describe)
	if err != nil {
		return nil, nil, err
	}
	return out.Bytes(), stderr, nil
}

// Stream is Run for a tool whose output is passed on as it is, such as
// helm's manifests: its stdout goes to stdout as the tool writes it instead of
// being held in memory, so on a failure stdout has what it wrote before.
func Stream(ctx context.Context, tool string, args []string, dir string, env []string, stdout io.Writer, describe func(msg string) string) (stderr []byte, err error) {
	bin, err := lookPath(tool, envPath(env))
	if err != nil {
		return nil, err
	}
	var errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdout, cmd.Stderr = stdout, &errOut
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
		return nil, &serving.ExitError{Code: code, Err: errors.New(describe(msg))}
	case err != nil:
		return nil, fmt.Errorf("running %s: %w", tool, err)
	}
	return errOut.Bytes(), nil
}

// Find looks name up on the PATH of env, as Run does.
func Find(name string, env []string) (string, error) {
	return lookPath(name, envPath(env))
}

// envPath is the PATH of env; the last one wins, as with exec.
func envPath(env []string) string {
	var pathList string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathList = v
		}
	}
	return pathList
}

// lookPath finds an executable in pathList, the PATH of the plugin env rather
// than of this process, so a request's env is honoured the same way in tests
// and in sidecars; relative entries are skipped, since they would resolve
// inside the user's repository.
func lookPath(name, pathList string) (string, error) {
	for _, dir := range filepath.SplitList(pathList) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found on PATH (%s)", name, pathList)
}
