package command

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// This file keeps the processes of plugin commands from outliving them.
//
// cmp-server is the first process of its sidecar container, so every orphan in
// the container is re-parented to it, and a zombie nobody waits for stays in the
// process table until the pod is deleted. Two mechanisms:
//
//   - The reaper (StartReaper, serve only) waits for every zombie child of the
//     server except the commands the runner waits for itself: those must keep
//     their exit status, which a blanket wait4(-1) would steal from
//     exec.Cmd.Wait. It lists zombie children in /proc and waits for each by pid;
//     the runner starts commands and registers their pids under one lock that
//     the reaper also holds while it waits, so a command that exits at once can
//     never be taken for an orphan. (waitid(WNOWAIT) could peek at a zombie
//     without reaping it, but it returns one arbitrary child: a command not yet
//     collected by its runner would hide the orphans behind it.)
//
//   - At the end of every command, what is left of it is killed: its process
//     group, and every process that carries the command's random
//     CMP_SERVER_COMMAND_ID (keys.EnvCommandID) in its environment, with all
//     their descendants. Processes inherit the environment, so a setsid escapee
//     or a double-forked daemon still carries it after it has left the group
//     and lost its parent, and a concurrent command's processes carry another
//     value: they are left alone. Only processes started after the command (by
//     their start time in /proc) are considered.
//
//   - A process can clear its environment (env -i) after leaving the group,
//     and keep a daemon past its request (an attack run kept a plugin server
//     on another plugin's socket that way). The subreaper still knows it: when
//     its parent exits it is re-parented to the server, and a child of the
//     server that is not a command it started is an orphan of some command.
//     Of which one is told by time: the commands running when it started. It
//     is killed (with its descendants) at the end of the last of them, so it
//     never outlives its own command by more than the commands it overlapped,
//     each bounded by its timeout, and a concurrent command's daemon lives as
//     long as that command does.

// procStat is what the leftover search needs from /proc/<pid>/stat.
type procStat struct {
	pid, ppid int
	state     byte
	// start is the start time in clock ticks after boot; with pid it names one
	// process, as pids are reused.
	start uint64
}

// readStat parses /proc/<pid>/stat. The command name (field 2) may contain
// spaces and parentheses, so fields are counted from the last ')'.
func readStat(pid int) (procStat, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	// state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
	// utime stime cutime cstime priority nice num_threads itrealvalue starttime
	f := bytes.Fields(data[i+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return procStat{}, err
	}
	start, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return procStat{}, err
	}
	return procStat{pid: pid, ppid: ppid, state: f[0][0], start: start}, nil
}

// listProcs reads the stat of every process; processes that exit meanwhile are
// skipped. (/proc/<pid>/task/<tid>/children would list only our children, but
// kernels without CONFIG_PROC_CHILDREN lack it.)
func listProcs() ([]procStat, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	procs := make([]procStat, 0, len(names))
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if p, err := readStat(pid); err == nil {
			procs = append(procs, p)
		}
	}
	return procs, nil
}

// hasEnv reports whether the process's initial environment holds entry
// (NAME=value) exactly. Unreadable (gone, or another user's) means no.
func hasEnv(pid int, entry []byte) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	return bytes.HasPrefix(data, entry[1:]) || bytes.Contains(data, entry)
}

// signalProc sends sig to p unless its pid now names another process. A pidfd
// pins the process between that check and the signal; where pidfds are missing
// (kernels before 5.3, old seccomp profiles) the plain kill leaves a window of
// microseconds.
func signalProc(p procStat, sig syscall.Signal) {
	fd, openErr := unix.PidfdOpen(p.pid, 0)
	if errors.Is(openErr, unix.ESRCH) {
		return
	}
	if openErr == nil {
		defer unix.Close(fd)
	}
	if cur, err := readStat(p.pid); err != nil || cur.start != p.start {
		return
	}
	if openErr == nil {
		err := unix.PidfdSendSignal(fd, sig, nil, 0)
		if err == nil || errors.Is(err, unix.ESRCH) {
			return
		}
	}
	_ = syscall.Kill(p.pid, sig)
}

// commandProcs finds what is left of one running command.
type commandProcs struct {
	// env is "\x00NAME=value\x00", the entry every process of the command carries.
	env []byte

	mu    sync.Mutex
	pgid  int
	start uint64 // start time of the command's process; 0 until known
	// seen are the processes signalled so far: a child of one that clears its
	// environment is still known once it is re-parented.
	seen map[[2]uint64]bool
}

func newCommandProcs(envEntry string) *commandProcs {
	return &commandProcs{env: []byte("\x00" + envEntry + "\x00"), seen: map[[2]uint64]bool{}}
}

// started records the command's process; its descendants start no earlier.
func (c *commandProcs) started(pid int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pgid = pid
	if p, err := readStat(pid); err == nil {
		c.start = p.start
	}
}

// signal sends sig once to the command's process group and to every live
// process of the command with its descendants, and returns how many processes
// it found.
func (c *commandProcs) signal(sig syscall.Signal) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pgid > 0 {
		_ = syscall.Kill(-c.pgid, sig)
	}
	procs, err := listProcs()
	if err != nil {
		return 0
	}
	self := os.Getpid()
	children := map[int][]procStat{}
	var roots []procStat
	commands.mu.Lock()
	for _, p := range procs {
		if p.pid == self || p.start < c.start || p.state == 'Z' || p.state == 'X' {
			continue
		}
		children[p.ppid] = append(children[p.ppid], p)
		if c.seen[[2]uint64{uint64(p.pid), p.start}] || hasEnv(p.pid, c.env) || unownedOrphan(p, self) {
			roots = append(roots, p)
		}
	}
	commands.mu.Unlock()
	found := map[int]procStat{}
	var add func(p procStat)
	add = func(p procStat) {
		if _, ok := found[p.pid]; ok {
			return
		}
		found[p.pid] = p
		for _, child := range children[p.pid] {
			add(child)
		}
	}
	for _, p := range roots {
		add(p)
	}
	for _, p := range found {
		c.seen[[2]uint64{uint64(p.pid), p.start}] = true
		signalProc(p, sig)
	}
	return len(found)
}

// kill SIGKILLs what is left of the command until nothing is: a killed parent
// re-parents its children, which the next round finds by their environment or
// as known processes. A process stuck in the kernel may survive the rounds
// (about 3 s); it is logged.
func (c *commandProcs) kill(log *zap.Logger) {
	for round := range 40 {
		if c.signal(syscall.SIGKILL) == 0 {
			return
		}
		time.Sleep(min(5*time.Millisecond<<round, 100*time.Millisecond))
	}
	c.mu.Lock()
	n := len(c.seen)
	c.mu.Unlock()
	log.Warn("processes of a finished command survive SIGKILL", zap.Int("processes", n))
}

// commands are the pids the runner waits for itself (exec.Cmd.Wait), which the
// reaper must leave alone, with their start times (clock ticks after boot): an
// orphan belongs to the commands running when it started. mu is held while a
// command starts, while the reaper waits, and while leftovers are searched.
var commands = struct {
	mu   sync.Mutex
	pids map[int]uint64
}{pids: map[int]uint64{}}

// startCommand starts cmd and registers its pid before the reaper can see it.
func startCommand(cmd *exec.Cmd) error {
	commands.mu.Lock()
	defer commands.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	// Unreadable means the command is gone already: then it owns nothing
	// later than its start, which 0 says as well as any time.
	var start uint64
	if p, err := readStat(cmd.Process.Pid); err == nil {
		start = p.start
	}
	commands.pids[cmd.Process.Pid] = start
	return nil
}

// unownedOrphan reports whether p is a child of the server (self) that is no
// command, started while no command still running had started: an orphan
// whose every possible command has ended. commands.mu is held.
func unownedOrphan(p procStat, self int) bool {
	if p.ppid != self {
		return false
	}
	if _, ok := commands.pids[p.pid]; ok {
		return false
	}
	for _, start := range commands.pids {
		if start <= p.start {
			return false
		}
	}
	return true
}

// commandWaited unregisters a command once exec.Cmd.Wait has reaped it.
func commandWaited(pid int) {
	commands.mu.Lock()
	defer commands.mu.Unlock()
	delete(commands.pids, pid)
}

// StartReaper makes the process a child subreaper and reaps its zombie children,
// except running commands, until stop is called. As PID 1 of a container the
// server adopts every orphan anyway; PR_SET_CHILD_SUBREAPER gives the same when
// it is not PID 1 (a shared process namespace, a wrapper entrypoint), so orphans
// of its commands come back to the process that knows them instead of an init
// that may not reap. Everything the process starts must go through
// startCommand once the reaper runs.
func StartReaper(log *zap.Logger) (stop func(), err error) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("cannot become a child subreaper: %w", err)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		defer signal.Stop(sigs)
		// SIGCHLD is enough, the ticker only guards against a missed one.
		tick := time.NewTicker(time.Minute)
		defer tick.Stop()
		for {
			if n := reapOrphans(); n > 0 {
				log.Debug("reaped orphans", zap.Int("count", n))
			}
			select {
			case <-done:
				return
			case <-sigs:
			case <-tick.C:
			}
		}
	}()
	return func() { close(done); <-finished }, nil
}

// reapOrphans waits for every zombie child that is not a command, and returns
// how many it reaped.
func reapOrphans() int {
	procs, err := listProcs()
	if err != nil {
		return 0
	}
	self := os.Getpid()
	commands.mu.Lock()
	defer commands.mu.Unlock()
	n := 0
	for _, p := range procs {
		if _, running := commands.pids[p.pid]; p.ppid != self || p.state != 'Z' || running {
			continue
		}
		var ws unix.WaitStatus
		for {
			// __WALL: an adopted child may not have SIGCHLD as its exit signal.
			pid, err := unix.Wait4(p.pid, &ws, unix.WNOHANG|unix.WALL, nil)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err == nil && pid == p.pid {
				n++
			}
			break
		}
	}
	return n
}
