package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
)

// forkPlugin leaves work behind the way careless plugins do. fork: CHILDREN
// background sleeps nobody waits for, still running when the shell exits (the
// server kills them, and they become zombies of whoever adopted them), and a
// setsid escapee that leaves the command's process group. clear: a setsid
// escapee that also clears its environment. sleep: a background and a
// foreground sleep, for a request stopped at its deadline. exit: children
// dying around the command's own exit, whose status must still reach the server.
const forkPlugin = `kind: ConfigManagementPlugin
metadata: {name: forker}
spec:
  generate:
    command: [sh, -c]
    args:
    - |
      case "$ARGOCD_ENV_MODE" in
      fork)
        i=0
        while [ $i -lt "$ARGOCD_ENV_CHILDREN" ]; do sleep 30 >/dev/null 2>&1 & i=$((i+1)); done
        # Wait until the escapee has left the group, or the group kill at the
        # end of the command could catch it first.
        setsid sh -c ': > .escaped; exec sleep 1000' </dev/null >/dev/null 2>&1 &
        while [ ! -e .escaped ]; do sleep 0.01; done
        echo '{"kind":"ConfigMap","metadata":{"name":"forked"}}' ;;
      clear)
        # Out of the group and without the environment that names the
        # command: only the subreaper can still attribute it.
        setsid sh -c ': > .cleared; exec env -i sleep 1000' </dev/null >/dev/null 2>&1 &
        while [ ! -e .cleared ]; do sleep 0.01; done
        sleep 0.1
        echo '{"kind":"ConfigMap","metadata":{"name":"cleared"}}' ;;
      sleep)
        sleep 1000 & sleep 1000 ;;
      exit)
        i=0
        while [ $i -lt "$ARGOCD_ENV_CHILDREN" ]; do (exit 0) & i=$((i+1)); done
        exit 7 ;;
      esac
`

// nsProcs counts the processes of the PID namespace whose init is the host pid
// init, through that namespace's own /proc (unshare --mount-proc mounted it in
// init's mount namespace): zombies, and live processes other than init.
func nsProcs(t *testing.T, init int) (zombies, live int) {
	t.Helper()
	procDir := fmt.Sprintf("/proc/%d/root/proc", init)
	entries, err := os.ReadDir(procDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == 1 {
			continue
		}
		data, err := os.ReadFile(filepath.Join(procDir, e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
		if len(fields) > 0 && fields[0] == "Z" {
			zombies++
		} else {
			live++
		}
	}
	return zombies, live
}

// childOf finds the host pid of parent's child.
func childOf(t *testing.T, parent int) int {
	t.Helper()
	var child int
	waitFor(t, "unshare's child", func() bool {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
			if err != nil {
				continue
			}
			fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
			if len(fields) > 1 && fields[1] == strconv.Itoa(parent) {
				child, _ = strconv.Atoi(e.Name())
				return true
			}
		}
		return false
	})
	return child
}

// TestPID1ReapsOrphansAndKillsLeftovers runs the server as PID 1 of a new PID
// namespace, as in a sidecar container: orphans of plugin commands are re-parented
// to it, so it must reap them (it did not: every orphan stayed a zombie), and what
// is left of a command when it ends must be killed, setsid escapees included.
// CMP_FORK_CHILDREN sets the children per request (300).
func TestPID1ReapsOrphansAndKillsLeftovers(t *testing.T) {
	t.Parallel()
	if err := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "true").Run(); err != nil {
		t.Skipf("skipped: cannot create a PID namespace here (unshare --pid --fork --mount-proc: %v); it needs root or user namespaces", err)
	}
	children := 300
	if v, err := strconv.Atoi(os.Getenv("CMP_FORK_CHILDREN")); err == nil && v > 0 {
		children = v
	}
	configDir, socketDir, workDir := layout(t, forkPlugin)
	socket := filepath.Join(socketDir, "forker.sock")
	// --kill-child: if the test dies, the namespace dies with unshare.
	ns := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "--kill-child",
		binary, "serve", "--config-dir", configDir, "--socket-dir", socketDir, "--work-dir", workDir, "--kill-grace", "1s")
	logs, exited := startCmd(t, ns)
	init := childOf(t, ns.Process.Pid)
	t.Cleanup(func() {
		// unshare does not forward signals: stop the server itself.
		_ = syscall.Kill(init, syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("server exit: %v\n%s", err, logs.String())
			}
		case <-time.After(30 * time.Second):
			_ = ns.Process.Kill()
			t.Errorf("server did not exit on SIGTERM\n%s", logs.String())
		}
	})
	waitFor(t, "socket", func() bool { _, err := os.Stat(socket); return err == nil })
	if data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", init)); !strings.Contains(string(data), "NSpid:\t"+strconv.Itoa(init)+"\t1\n") {
		t.Fatalf("the server is not PID 1 of its namespace:\n%s", data)
	}
	repo := t.TempDir()
	if err := os.WriteFile(filepath.Join(repo, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	generate := func(timeout time.Duration, env ...string) ([]string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		c, err := client.Dial(ctx, socket)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.Generate(ctx, client.Request{RepoRoot: repo, Env: env})
	}
	// settled waits (bounded) for the namespace to hold only the server and
	// reports what is left.
	settled := func(what string) {
		t.Helper()
		var z, l int
		waitUntilOrTimeout(10*time.Second, func() bool { z, l = nsProcs(t, init); return z == 0 && l == 0 })
		t.Logf("%s: %d zombies, %d leftover processes in the namespace", what, z, l)
		if z != 0 || l != 0 {
			t.Errorf("%s: %d zombies and %d leftover processes, want none", what, z, l)
		}
	}

	for range 3 {
		got, err := generate(60*time.Second, "ARGOCD_ENV_MODE=fork", "ARGOCD_ENV_CHILDREN="+strconv.Itoa(children))
		if err != nil || len(got) != 1 || !strings.Contains(got[0], "forked") {
			t.Fatalf("fork: %q, %v\n%s", got, err, logs.String())
		}
	}
	settled(fmt.Sprintf("after 3 requests forking %d children and a setsid escapee each", children))

	for range 3 {
		got, err := generate(60*time.Second, "ARGOCD_ENV_MODE=clear")
		if err != nil || len(got) != 1 || !strings.Contains(got[0], "cleared") {
			t.Fatalf("clear: %q, %v\n%s", got, err, logs.String())
		}
	}
	settled("after 3 requests leaving an escapee that cleared its environment (setsid, env -i)")

	// The reaper races with the runner for every exit here, and must lose.
	for range 3 {
		_, err := generate(60*time.Second, "ARGOCD_ENV_MODE=exit", "ARGOCD_ENV_CHILDREN="+strconv.Itoa(children))
		if err == nil || !strings.Contains(err.Error(), "failed exit status 7") {
			t.Fatalf("exit: %v, want the command's own exit status 7", err)
		}
	}
	settled("after 3 requests exiting 7 amid their children's exits")

	for range 5 {
		if _, err := generate(2*time.Second, "ARGOCD_ENV_MODE=sleep"); err == nil {
			t.Fatal("sleep succeeded before its deadline")
		}
	}
	settled("after 5 requests of `sleep 1000 & sleep 1000` stopped at their deadline")
}

// waitUntilOrTimeout polls cond until it holds or d passes; the caller reports.
func waitUntilOrTimeout(d time.Duration, cond func() bool) {
	deadline := time.Now().Add(d)
	for !cond() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}
