package servingtest

import (
	"bytes"
	"errors"
	"os/exec"
	"testing"
)

// Run runs cmd with its output captured and returns its exit code, stdout and
// stderr; a command that cannot run at all fails t.
func Run(t testing.TB, cmd *exec.Cmd) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}
