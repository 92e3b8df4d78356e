package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// What the node changes on the host despite its namespaces, and how it is put
// back: the kubelet's kernel tunables (global sysctls) and its cgroups (the
// cgroup hierarchies are the host's). Everything else it touches (mounts,
// iptables, links, /run, /var/lib/cni, /var/log/pods) stays inside nodeNS.
//
// Every run writes a record before it starts anything, and removes it when it
// has restored the host; a run that was killed leaves its record, and the next
// run restores what that one left (leftover processes, cgroups, sysctls).

// kubeletSysctls are the kernel tunables kubelet v1.34 sets at start-up
// (pkg/kubelet/cm, setupKernelTunables) when protectKernelDefaults is false.
var kubeletSysctls = []string{
	"vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
	"kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes",
}

// nodeRecord is what a run must undo on the host.
type nodeRecord struct {
	Dir        string            `json:"dir"`
	Socket     string            `json:"socket"`     // containerd's: its shims name it
	CgroupRoot string            `json:"cgroupRoot"` // e.g. /cmpe2e-1234
	Sysctls    map[string]string `json:"sysctls"`    // values before the run
	PID        int               `json:"pid"`        // the test process
}

// recordDir holds the records, in the tool cache: outside any clone, kept
// across runs.
func recordDir() string {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "cmp-injector", "node-runs")
}

func (r *nodeRecord) file() string {
	return filepath.Join(recordDir(), strings.TrimPrefix(r.CgroupRoot, "/")+".json")
}

func (r *nodeRecord) save() error {
	if err := os.MkdirAll(recordDir(), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(r.file(), b, 0o644)
}

// RestoreLeftovers undoes what killed runs left behind (StartNode calls it
// first). A record whose test process still runs belongs to a concurrent run
// and is left alone.
func RestoreLeftovers() error {
	files, _ := filepath.Glob(filepath.Join(recordDir(), "*.json"))
	var errs []error
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var r nodeRecord
		if err := json.Unmarshal(b, &r); err != nil || r.CgroupRoot == "" {
			errs = append(errs, fmt.Errorf("unreadable node record %s: %w", f, err))
			continue
		}
		if r.PID > 0 && syscall.Kill(r.PID, 0) == nil && r.PID != os.Getpid() {
			continue
		}
		if err := r.restore(); err != nil {
			errs = append(errs, fmt.Errorf("restoring after the run in %s: %w", r.Dir, err))
		}
	}
	return errors.Join(errs...)
}

// restore kills what the run left running, removes its cgroups and puts the
// kernel tunables back; then forgets the record.
func (r *nodeRecord) restore() error {
	var errs []error
	// Container processes live in the run's cgroups; shims name the socket.
	// Pod sandboxes keep mounts and network namespaces of the node alive only
	// through these processes, so once they are gone so are the namespaces.
	if err := killCgroupProcs(r.CgroupRoot); err != nil {
		errs = append(errs, err)
	}
	killShims(r.Socket)
	if err := removeCgroups(r.CgroupRoot); err != nil {
		errs = append(errs, err)
	}
	for k, v := range r.Sysctls {
		if cur, err := readSysctl(k); err == nil && cur != v {
			if err := writeSysctl(k, v); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) == 0 {
		_ = os.RemoveAll(r.Dir)
		_ = os.Remove(r.file())
	}
	return errors.Join(errs...)
}

func sysctlPath(k string) string {
	return "/proc/sys/" + strings.ReplaceAll(k, ".", "/")
}

func readSysctl(k string) (string, error) {
	b, err := os.ReadFile(sysctlPath(k))
	return strings.TrimSpace(string(b)), err
}

func writeSysctl(k, v string) error {
	if err := os.WriteFile(sysctlPath(k), []byte(v), 0o644); err != nil {
		return fmt.Errorf("restore sysctl %s=%s: %w", k, v, err)
	}
	return nil
}

// cgroupMounts are the host's cgroup hierarchies (v1 controllers, the named
// systemd one and the unified v2 mount of a hybrid host).
func cgroupMounts() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 1 || (g[0] != "cgroup" && g[0] != "cgroup2") {
			continue
		}
		out = append(out, f[4])
	}
	return out, nil
}

// createCgroupRoot makes root in every hierarchy (the kubelet requires its
// cgroupRoot to exist), with cpuset's cpus and mems copied from the parent, as
// a v1 cpuset cgroup holds no process without them.
func createCgroupRoot(root string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		d := filepath.Join(m, root)
		if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
			return fmt.Errorf("create cgroup %s: %w", d, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(m, f)); err == nil {
				if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
					return fmt.Errorf("initialise %s: %w", filepath.Join(d, f), err)
				}
			}
		}
	}
	return nil
}

// cgroupDirs lists root's cgroup directories in every hierarchy, deepest first.
func cgroupDirs(root string) []string {
	mounts, _ := cgroupMounts()
	var dirs []string
	for _, m := range mounts {
		_ = filepath.WalkDir(filepath.Join(m, root), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	return dirs
}

// killCgroupProcs SIGKILLs every process in root's cgroups until none is left.
func killCgroupProcs(root string) error {
	var left []int
	err := Eventually(15*time.Second, 100*time.Millisecond, func() (bool, error) {
		left = left[:0]
		for _, d := range cgroupDirs(root) {
			b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					left = append(left, pid)
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		return len(left) == 0, fmt.Errorf("processes still in cgroup %s: %v", root, left)
	})
	return err
}

// killShims SIGKILLs containerd shims serving socket (they outlive containerd
// by design, reparented to init).
func killShims(socket string) {
	if socket == "" {
		return
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), "containerd-shim") || !strings.Contains(string(b), socket) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// removeCgroups removes root's cgroups, deepest first; a cgroup whose last
// process just died may take a moment to become removable.
func removeCgroups(root string) error {
	return Eventually(10*time.Second, 100*time.Millisecond, func() (bool, error) {
		var errs []error
		for _, d := range cgroupDirs(root) {
			if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
				errs = append(errs, err)
			}
		}
		return len(errs) == 0, errors.Join(errs...)
	})
}

// LeftoverRuns lists the records of runs not yet undone.
func LeftoverRuns() []string {
	files, _ := filepath.Glob(filepath.Join(recordDir(), "*.json"))
	return files
}
