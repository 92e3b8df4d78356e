// Package harness runs a real control plane (etcd + kube-apiserver) and the
// product's own binaries as local processes for the end-to-end tests, and stops
// every process it started, by PID, whatever happens to the test.
package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
)

// Process is a child process with its output captured for failure messages.
type Process struct {
	Name string
	cmd  *exec.Cmd
	out  *servingtest.SyncBuffer
	done chan struct{}
	err  error
}

// Start runs argv with env added to ours. The child gets its own process group
// (so Stop reaches its children too) and dies with the test binary (Pdeathsig), so
// a crashed or killed test leaves nothing behind. When logTo is non-nil the output
// is also copied there.
func Start(name string, argv []string, env []string, dir string, logTo io.Writer) (*Process, error) {
	p := &Process{Name: name, out: &servingtest.SyncBuffer{}, done: make(chan struct{})}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = dir
	var w io.Writer = p.out
	if logTo != nil {
		w = io.MultiWriter(p.out, logTo)
	}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p.cmd = cmd
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// PID is the child's process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Output is everything the child printed so far.
func (p *Process) Output() string { return p.out.String() }

// Exited reports whether the child has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Wait waits for the child to end on its own, up to timeout.
func (p *Process) Wait(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		return fmt.Errorf("%s (pid %d) still running after %s", p.Name, p.PID(), timeout)
	}
}

// WaitHTTPOK polls url until it answers 200, failing at once with the
// process's last output when the process exits first: the readiness wait of
// every server the harness starts and probes over HTTP.
func (p *Process) WaitHTTPOK(name, url string, timeout, every time.Duration) error {
	return Eventually(timeout, every, func() (bool, error) {
		if done, werr := p.Exited(); done {
			return false, Final(fmt.Errorf("%s exited: %w\n%s", name, werr, tail(p.Output(), 4000)))
		}
		resp, err := http.Get(url)
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Errorf("%s %s: %s", name, url, resp.Status)
	})
}

// Signal sends sig to the child only.
func (p *Process) Signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// Stop sends SIGTERM to the child's process group, then SIGKILL after grace.
func (p *Process) Stop(grace time.Duration) error {
	if done, err := p.Exited(); done {
		return err
	}
	pgid := p.PID()
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	return p.err
}

// RepoRoot finds the repository root (the directory holding go.mod of the main
// module) above the current directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.Contains(string(b), "module github.com/cmp-injector/cmp-injector\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repository root (go.mod of github.com/cmp-injector/cmp-injector) not found")
		}
		dir = parent
	}
}

// Tool returns bin/<name> of the repository, installed by hack/tools.sh.
func Tool(name string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, "bin", name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s is missing: run `hack/tools.sh %s` (or make tools): %w", p, name, err)
	}
	return p, nil
}

// BuildBinaries compiles the product's commands into dir, once per test run.
func BuildBinaries(ctx context.Context, dir string, cmds ...string) (map[string]string, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, c := range cmds {
		dst := filepath.Join(dir, c)
		b := exec.CommandContext(ctx, "go", "build", "-o", dst, "./cmd/"+c)
		b.Dir = root
		b.Env = append(os.Environ(), "CGO_ENABLED=0")
		if msg, err := b.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build ./cmd/%s: %w\n%s", c, err, msg)
		}
		out[c] = dst
	}
	return out, nil
}

// Eventually polls cond every interval until it returns true or timeout passes,
// returning the last error cond gave.
func Eventually(timeout, interval time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		var final finalError
		if errors.As(err, &final) {
			return final.err
		}
		last = err
		if time.Now().After(deadline) {
			if last == nil {
				last = errors.New("condition not met")
			}
			return fmt.Errorf("after %s: %w", timeout, last)
		}
		time.Sleep(interval)
	}
}

// Final marks a condition's error as one no retry can cure (a process that
// exited, say): Eventually returns it at once instead of waiting out its
// timeout, so a test fails with the cause in seconds, not minutes later.
func Final(err error) error { return finalError{err} }

type finalError struct{ err error }

func (f finalError) Error() string { return f.err.Error() }
func (f finalError) Unwrap() error { return f.err }

// MustRepoRoot is RepoRoot for tests: it fails t when the root is not found.
func MustRepoRoot(t testing.TB) string {
	t.Helper()
	r, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// MustTool is Tool for tests: it fails t with the command that installs name.
func MustTool(t testing.TB, name string) string {
	t.Helper()
	p, err := Tool(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
