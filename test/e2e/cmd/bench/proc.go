package main

import (
	"fmt"
	"os"
	"os/exec"
)

// serverProc is a server under test, pinned to the server CPU, with its output
// in a file. Through a pipe, a goroutine of this process would copy it, on
// either CPU, the server's too (the injector logs a line per review: hundreds
// of thousands in a run), and hold it all in memory; a file costs the server
// the same write and this process nothing, and can be read at any time.
type serverProc struct {
	name string
	cmd  *exec.Cmd
	log  string
}

// startServer starts argv pinned to CPU 1, with env added to ours and its
// output in logPath.
func startServer(name string, argv, env []string, logPath string) (*serverProc, error) {
	out, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer out.Close() // the child holds its own copy
	argv = pinned(1, argv...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &serverProc{name: name, cmd: cmd, log: logPath}, nil
}

func (p *serverProc) pid() int { return p.cmd.Process.Pid }

// logTail is the end of what the server printed, for an error message.
func (p *serverProc) logTail() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	return tail(string(b), 2000)
}

// stop kills the server and waits for it; it may be called again.
func (p *serverProc) stop() {
	if p == nil || p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	p.cmd = nil
}
