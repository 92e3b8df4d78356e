package command

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"

	"go.uber.org/zap"

	"github.com/cmp-injector/cmp-injector/cmpserver/askpass"
	"github.com/cmp-injector/cmp-injector/cmpserver/redact"
	"github.com/cmp-injector/cmp-injector/cmpserver/tracing"
	"github.com/cmp-injector/cmp-injector/cmpserver/unlinked"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// Options bound every plugin command (init, generate, discovery and dynamic
// parameters).
type Options struct {
	// Timeout caps one command; Argo CD documents 90 s but never applies it.
	Timeout time.Duration
	// DeadlineBuffer is taken off the request deadline so the error reaches the
	// client before its own deadline fires.
	DeadlineBuffer time.Duration
	// KillGrace is the time between SIGTERM and SIGKILL to the process group.
	KillGrace time.Duration
	// OutputGrace is how long stdout and stderr may stay open after the
	// command exits (held by a background child) before what is left of the
	// command is killed and the output read so far is used.
	OutputGrace time.Duration
	// MaxStdoutBytes fails a command whose output is larger.
	MaxStdoutBytes int64
	// MaxStderrBytes truncates the captured stderr (it is only reported).
	MaxStderrBytes int64
	// Redact replaces the sidecar's Secret values in a command's stderr as it
	// is read, before it is cut at MaxStderrBytes (so no cut leaves part of a
	// value) and before it reaches an error, a log line or a Report. Nil:
	// nothing is replaced.
	Redact *redact.Redactor
	// AskPassBin is a directory holding "argocd", a link to the server, put
	// first on PATH for git when the repo-server shares credentials
	// (askpass.Env). Empty: GIT_ASKPASS is pointed at the server instead.
	AskPassBin string
}

// defaultMaxStdoutBytes fits the sidecar's default memory limit (the chart's
// 512Mi): the server peaks at about twice the output plus ~15 MiB (the response
// is held once, plus what the garbage collector has not freed yet), which leaves
// room for the plugin's own processes and a second large request.
const defaultMaxStdoutBytes = 64 << 20

// Problems names each option that cannot work, by its flag (nil entries
// for those that can; errors.Join leaves them out).
func (o Options) Problems() []error {
	return []error{
		serving.NotNegative("max-stdout-bytes", o.MaxStdoutBytes),
		serving.NotNegative("max-stderr-bytes", o.MaxStderrBytes),
		serving.NotNegative("exec-timeout", o.Timeout),
		serving.NotNegative("deadline-buffer", o.DeadlineBuffer),
		serving.NotNegative("kill-grace", o.KillGrace),
		serving.NotNegative("output-grace", o.OutputGrace),
	}
}

// DefaultOptions are the serve defaults.
func DefaultOptions() Options {
	return Options{Timeout: 90 * time.Second, DeadlineBuffer: 100 * time.Millisecond, KillGrace: 5 * time.Second,
		OutputGrace: time.Second, MaxStdoutBytes: defaultMaxStdoutBytes, MaxStderrBytes: 64 << 10}
}

// Observer is told how each command ended: the server's metrics, or a local
// caller that shows it to an author (the playground).
type Observer interface {
	CommandDone(Report)
}

// ObserverFunc is an Observer that is a function.
type ObserverFunc func(Report)

// CommandDone calls f.
func (f ObserverFunc) CommandDone(r Report) { f(r) }

// Place is where a command runs: its working directory (the app dir), its
// env, and the request dir its stdout is spooled to.
type Place struct {
	App   string
	Env   []string
	Spool string
}

// newCommandID marks one command's processes (keys.EnvCommandID).
func newCommandID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Runner executes plugin commands.
type Runner struct {
	opts Options
	log  *zap.Logger
	obs  Observer
	// self replaces keys.PluginServerPath as argv[0]: in a sidecar it is that very
	// file, and on a laptop it lets the same plugin.yaml run under the local Runner.
	self string
}

// Report is how one plugin command ended: the server counts it, a local
// caller shows it to an author (the playground).
type Report struct {
	Phase string `json:"phase"` // init, generate, discover or parameters
	Argv  string `json:"argv"`  // as error messages show it
	// Exit is the exit code, or "signal_N", or "start_error".
	Exit     string        `json:"exit"`
	Duration time.Duration `json:"duration"`
	// Stderr is what the command printed on stderr, capped by MaxStderrBytes.
	Stderr      string `json:"stderr"`
	StdoutBytes int64  `json:"stdoutBytes"`
	// Stopped says why the command was stopped ("" when it ended on its own).
	Stopped string `json:"stopped,omitempty"`
}

// NewRunner runs commands within opts; obs is told how each ended.
func NewRunner(opts Options, log *zap.Logger, obs Observer) *Runner {
	self, err := os.Executable()
	if err != nil {
		self = keys.PluginServerPath
	}
	return &Runner{opts: opts, log: log, obs: obs, self: self}
}

// Run executes c (command ++ args, no shell) in ws's app dir with its env and
// returns its stdout, spooled to a file in the request dir (the caller closes
// it). The command gets its own process group, which is sent SIGTERM when the
// request deadline (minus the buffer) or the command timeout is reached,
// whichever comes first, and SIGKILL after the grace period. Whatever is left of
// the command after it exits is killed too: its group, and processes that left
// the group but carry its keys.EnvCommandID (see procs.go).
//
// In a traced request the command is a span (tracing.SpanCommand) with its
// program, phase and exit.
func (r *Runner) Run(ctx context.Context, phase string, c pluginconfig.Command, ws Place) (*Output, error) {
	ctx, span := tracing.Begin(ctx, tracing.SpanCommand)
	out, err := r.run(ctx, phase, c, ws, span)
	if span.Recording() {
		// The error as the client is told it (the server's interceptor
		// redacts it again on its way out).
		span.End(r.opts.Redact.Error(err))
	}
	return out, err
}

func (r *Runner) run(ctx context.Context, phase string, c pluginconfig.Command, ws Place, span *tracing.Span) (*Output, error) {
	argv := append(append([]string{}, c.Command...), c.Args...)
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("Command is empty") //nolint:staticcheck // Argo CD's text, to the letter
	}
	if span.Recording() {
		span.Set(tracing.AttrCommand.String(argv[0]), tracing.AttrPhase.String(phase))
	}
	display := formatArgv(argv)
	if argv[0] == keys.PluginServerPath {
		argv[0] = r.self
	}
	ctx, cancel, reason := r.commandContext(ctx)
	defer cancel()

	// Not in memory: the server's memory must not grow with the output (a
	// sidecar's limit is 512Mi); splitting reads it back one document at a time.
	stdout, err := newSpool(ws.Spool, r.opts.MaxStdoutBytes, cancel)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			stdout.Close()
		}
	}()
	stderr := &cappedBuffer{limit: r.opts.MaxStderrBytes}
	start := time.Now()
	state, err, startErr := r.execute(ctx, argv, ws, stdout, stderr)
	elapsed := time.Since(start)
	if startErr != nil {
		rep := Report{Phase: phase, Argv: display, Exit: "start_error", Duration: elapsed, Stderr: startErr.Error()}
		r.obs.CommandDone(rep)
		traceReport(span, rep)
		// Argo CD returns exec's error as is; the command follows as our detail.
		return nil, fmt.Errorf("%w (starting `%s`)", startErr, display)
	}
	code := "0"
	if state != nil && !state.Success() {
		code = exitLabel(state)
	}
	// stderr is read into a string once, for the report, the log and the error.
	errText := stderr.String()
	rep := Report{Phase: phase, Argv: display, Exit: code, Duration: elapsed,
		Stderr: errText, StdoutBytes: stdout.size, Stopped: reason()}
	r.obs.CommandDone(rep)
	traceReport(span, rep)
	r.log.Debug("command finished", zap.String("phase", phase), zap.String("argv", display),
		zap.String("exit", code), zap.Duration("duration", elapsed), zap.Int64("stdout_bytes", stdout.size))

	if stdout.overflow {
		return nil, fmt.Errorf("`%s` failed: output exceeds %d bytes (limit --max-stdout-bytes)", display, r.opts.MaxStdoutBytes)
	}
	if stdout.err != nil {
		return nil, fmt.Errorf("`%s` failed: error storing its output: %w", display, stdout.err)
	}
	if err != nil {
		return nil, commandError(display, err, state, reason(), strings.TrimSpace(errText))
	}
	if errText != "" {
		r.log.Info("command stderr", zap.String("phase", phase), zap.String("stderr", errText))
	}
	ok = true
	return stdout, nil
}

// traceReport puts how a command ended on its span: never its argv or
// stderr, which may carry values of secrets.
func traceReport(span *tracing.Span, rep Report) {
	if !span.Recording() {
		return
	}
	span.Set(tracing.AttrExit.String(rep.Exit), tracing.AttrStdout.Int64(rep.StdoutBytes))
	if code, err := strconv.Atoi(rep.Exit); err == nil {
		span.Set(tracing.AttrExitCode.Int(code))
	}
	if rep.Stopped != "" {
		span.Set(tracing.AttrStopped.String(rep.Stopped))
	}
}

// execute runs argv in its own process group until it and whatever it left
// behind are gone, its stdout into stdout and its stderr, redacted, into
// stderr. It returns how the command ended and Wait's error, or why it did
// not start.
func (r *Runner) execute(ctx context.Context, argv []string, ws Place, stdout *Output, stderr *cappedBuffer) (state *os.ProcessState, waitErr, startErr error) {
	// Our own pipes rather than io.Writers: exec.Cmd.Wait would then wait for
	// them to close, that is for every process holding them, and give up after
	// WaitDelay with an error even when the command succeeded. We decide instead,
	// below, how long a leftover may keep them open.
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	defer outR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		outW.Close()
		return nil, nil, err
	}
	defer errR.Close()
	// The marker goes last so that nothing in the request can replace it.
	marker := keys.EnvCommandID + "=" + newCommandID()
	procs := newCommandProcs(marker)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = ws.App
	// git asks this server for the request's credentials (askpass.Env).
	env := askpass.Env(ws.Env, r.self, r.opts.AskPassBin)
	cmd.Env = append(env[:len(env):len(env)], marker) //nolint:gocritic // a copy with one more element
	cmd.Stdout = outW
	cmd.Stderr = errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stoppedAt atomic.Pointer[time.Time]
	cmd.Cancel = func() error {
		now := time.Now()
		stoppedAt.Store(&now)
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		// Escapees get the same chance to clean up.
		procs.signal(syscall.SIGTERM)
		return err
	}
	cmd.WaitDelay = r.opts.KillGrace

	err = startCommand(cmd)
	// The command has its copies; ours would keep the pipes open forever.
	outW.Close()
	errW.Close()
	if err != nil {
		return nil, nil, err
	}
	procs.started(cmd.Process.Pid)
	var copying sync.WaitGroup
	copying.Add(2)
	go func() { defer copying.Done(); _, _ = io.Copy(stdout, outR) }()
	go func() {
		defer copying.Done()
		w := r.opts.Redact.Stream(stderr)
		_, _ = io.Copy(w, errR)
		_ = w.Flush()
	}()
	outputClosed := make(chan struct{})
	go func() { copying.Wait(); close(outputClosed) }()

	err = cmd.Wait()
	commandWaited(cmd.Process.Pid)
	r.awaitOutput(ctx, outputClosed, stoppedAt.Load())
	// Nothing the command started may outlive it: background children, setsid
	// escapees, daemons. Usually there is nothing to kill.
	procs.kill(r.log)
	select {
	case <-outputClosed:
	case <-time.After(time.Second):
		// Whatever still holds the pipes escaped the kill (it left the tree
		// and cleared its env): stop reading rather than wait for it.
		outR.Close()
		errR.Close()
		<-outputClosed
	}
	return cmd.ProcessState, err, nil
}

// awaitOutput waits, once the command has exited, for its stdout and stderr to
// close, which they do when no leftover process holds them. A command that ended
// on its own gets --output-grace (a background writer may be finishing; Argo CD
// would wait up to the request deadline, then return the output if the command
// succeeded). A stopped command's group got SIGTERM: its members get what is
// left of --kill-grace to exit, as exec.Cmd's WaitDelay gave them before.
func (r *Runner) awaitOutput(ctx context.Context, closed <-chan struct{}, stoppedAt *time.Time) {
	grace := r.opts.OutputGrace
	var stop <-chan struct{}
	if stoppedAt != nil {
		grace = r.opts.KillGrace - time.Since(*stoppedAt)
	} else {
		stop = ctx.Done()
	}
	if grace <= 0 {
		return
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-closed:
	case <-timer.C:
	case <-stop:
	}
}

// commandContext derives the command's context: the request deadline minus the
// buffer, capped by the command timeout. reason tells which one fired.
func (r *Runner) commandContext(parent context.Context) (context.Context, context.CancelFunc, func() string) {
	var deadline time.Time
	why := ""
	if r.opts.Timeout > 0 {
		deadline = time.Now().Add(r.opts.Timeout)
		why = fmt.Sprintf("killed after the command timeout of %s", r.opts.Timeout)
	}
	if d, ok := parent.Deadline(); ok {
		if d = d.Add(-r.opts.DeadlineBuffer); deadline.IsZero() || d.Before(deadline) {
			deadline, why = d, stoppedAtDeadline
		}
	}
	var ctx context.Context
	var cancel context.CancelFunc
	if deadline.IsZero() {
		ctx, cancel = context.WithCancel(parent)
	} else {
		ctx, cancel = context.WithDeadline(parent, deadline)
	}
	return ctx, cancel, func() string {
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			return why
		case parent.Err() != nil:
			return "request cancelled"
		}
		return ""
	}
}

func exitLabel(ps *os.ProcessState) string {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "signal_" + strconv.Itoa(int(ws.Signal()))
	}
	return strconv.Itoa(ps.ExitCode())
}

// stoppedAtDeadline is why a command stopped at the request deadline was
// stopped; its error is then a context.DeadlineExceeded (commandFailure).
const stoppedAtDeadline = "killed at the request deadline"

// commandFailure is a failed command's message. One stopped at the request
// deadline is context.DeadlineExceeded to errors.Is, so the request ends
// with gRPC's DeadlineExceeded (the service's withRepo).
type commandFailure struct {
	msg        string
	atDeadline bool
}

func (e *commandFailure) Error() string { return e.msg }

func (e *commandFailure) Is(target error) bool {
	return e.atDeadline && target == context.DeadlineExceeded
}

// argoKilled is how Argo CD's message reads for a command stopped at the
// deadline: it SIGKILLs the command at once.
const argoKilled = "signal: killed"

// commandError words a failed command as argocd-cmp-server does, because users
// search for these texts: "`<argv>` failed <status>[: <stderr>]". Our own detail,
// if any, comes after Argo CD's text in parentheses. stopped says why the command
// was stopped ("" if it ended on its own); Argo CD would report any such stop as
// "signal: killed", so that is the status we give, followed by how the command
// really ended (we send SIGTERM first, so it is usually "signal: terminated").
func commandError(display string, err error, ps *os.ProcessState, stopped, stderr string) error {
	status := err.Error() // for an *exec.ExitError, the ProcessState text
	detail := ""
	if stopped != "" {
		ended := status
		if ps != nil {
			ended = ps.String()
		}
		status, detail = argoKilled, stopped
		if ended != argoKilled {
			detail += "; the command ended with " + ended
		}
	}
	msg := fmt.Sprintf("`%s` failed %s", display, status) //nolint:gocritic // Argo CD's text, to the letter
	if stderr != "" {
		msg += ": " + stderr
	}
	if detail != "" {
		msg += " (" + detail + ")"
	}
	return &commandFailure{msg: msg, atDeadline: stopped == stoppedAtDeadline}
}

// formatArgv renders argv the way argocd-cmp-server prints a command in its
// messages, so that ours read the same: an empty argument is shown as "", one
// containing white space is Go-quoted (strconv.Quote), anything else is shown as
// is. The result is for reading and searching, not for pasting into a shell.
func formatArgv(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		switch {
		case a == "":
			out[i] = `""`
		case strings.IndexFunc(a, unicode.IsSpace) >= 0:
			out[i] = strconv.Quote(a)
		default:
			out[i] = a
		}
	}
	return strings.Join(out, " ")
}

// cappedBuffer keeps the first limit bytes (stderr, which is only reported) and
// counts the rest.
type cappedBuffer struct {
	buf     bytes.Buffer
	limit   int64
	dropped int64
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if b.limit <= 0 {
		return b.buf.Write(p)
	}
	room := b.limit - int64(b.buf.Len())
	if int64(len(p)) <= room {
		return b.buf.Write(p)
	}
	if room > 0 {
		b.buf.Write(p[:room])
	}
	b.dropped += int64(len(p)) - max(room, 0)
	return len(p), nil
}

func (b *cappedBuffer) String() string {
	if b.dropped > 0 {
		return fmt.Sprintf("%s… (%d more bytes dropped)", b.buf.String(), b.dropped)
	}
	return b.buf.String()
}

// Output holds a command's stdout in a temp file in the request dir, unlinked at
// once: commands never see it (even running in the request dir itself), and
// the space is freed when it is closed.
type Output struct {
	f          *os.File
	size       int64
	limit      int64
	overflow   bool
	err        error
	onOverflow func()
}

func newSpool(dir string, limit int64, onOverflow func()) (*Output, error) {
	f, err := unlinked.Create(dir, ".stdout-")
	if err != nil {
		return nil, fmt.Errorf("error creating the output file: %w", err)
	}
	return &Output{f: f, limit: limit, onOverflow: onOverflow}, nil
}

// Write stores p, or, past the limit or after a write error, drops it (so the
// command is never blocked on a full pipe) and stops the command.
func (s *Output) Write(p []byte) (int, error) {
	if s.overflow || s.err != nil {
		return len(p), nil
	}
	if s.limit > 0 && s.size+int64(len(p)) > s.limit {
		s.overflow = true
		s.onOverflow()
		return len(p), nil
	}
	n, err := s.f.Write(p)
	s.size += int64(n)
	if err != nil {
		s.err = err
		s.onOverflow()
	}
	return len(p), nil
}

// Reader reads the output from its start.
func (s *Output) Reader() io.Reader { return io.NewSectionReader(s.f, 0, s.size) }

// Bytes returns the output without one trailing newline, as Argo CD's server
// returns it; for outputs that are small or parsed whole anyway.
func (s *Output) Bytes() ([]byte, error) {
	out, err := io.ReadAll(s.Reader())
	return bytes.TrimSuffix(out, []byte("\n")), err
}

// Empty reports whether the output is empty or a lone newline.
func (s *Output) Empty() (bool, error) {
	if s.size > 1 {
		return false, nil
	}
	out, err := s.Bytes()
	return len(out) == 0, err
}

func (s *Output) Close() error { return s.f.Close() }
