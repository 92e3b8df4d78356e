package harness

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// What `make bench-node` reads of a pod the real node runs, beyond what the
// API keeps: the API stores the kubelet's container timestamps in whole
// seconds (metav1.Time), too coarse for a sidecar that starts in tens of
// milliseconds, so a container's start is also read from its first process
// (/proc start time, in clock ticks), and its memory from its cgroup.

// clockTick is USER_HZ, the unit of /proc/PID/stat's start time: 100 on
// every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// bootTime is when the host booted, to the clock tick: now minus
// /proc/uptime (/proc/stat's btime is whole seconds).
func bootTime() (time.Time, error) {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return time.Time{}, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return time.Time{}, fmt.Errorf("/proc/uptime: %q", b)
	}
	up, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return time.Time{}, err
	}
	return time.Now().Add(-time.Duration(up * float64(time.Second))), nil
}

// processStart is when pid was created, on the wall clock.
func processStart(boot time.Time, pid string) (time.Time, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return time.Time{}, err
	}
	// The command name (field 2) may hold spaces; the fields after its
	// closing parenthesis start at field 3, and the start time is field 22.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return time.Time{}, fmt.Errorf("/proc/%s/stat: %q", pid, b)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return time.Time{}, fmt.Errorf("/proc/%s/stat: %d fields", pid, len(f))
	}
	ticks, err := strconv.ParseInt(f[19], 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	return boot.Add(time.Duration(ticks) * clockTick), nil
}

// containerCgroup is a running container's cgroup directory in the hierarchy
// of controller (e.g. "memory"), found by its ID under the node's cgroup root.
func (n *Node) containerCgroup(s corev1.ContainerStatus, controller string) (string, error) {
	_, id, ok := strings.Cut(s.ContainerID, "://")
	if !ok || id == "" {
		return "", fmt.Errorf("container %s has no ID yet", s.Name)
	}
	for _, d := range cgroupDirs(n.rec.CgroupRoot) {
		if filepath.Base(d) == id && strings.Contains(d, "/"+controller+"/") {
			return d, nil
		}
	}
	return "", fmt.Errorf("no %s cgroup for container %s (%s)", controller, s.Name, id)
}

// ProcessStarts are, for each running container of pod, when its first
// process was created (runc creates it when the kubelet creates the
// container, and it execs the entrypoint when the kubelet starts it: the
// two are milliseconds apart). Terminated containers (a completed init
// container) have no process left and are not listed.
func (n *Node) ProcessStarts(pod *corev1.Pod) (map[string]time.Time, error) {
	boot, err := bootTime()
	if err != nil {
		return nil, err
	}
	out := map[string]time.Time{}
	for _, s := range AllStatuses(pod) {
		if s.State.Running == nil {
			continue
		}
		pids, err := n.containerPIDs(s)
		if err != nil {
			return nil, err
		}
		for _, pid := range pids {
			t, err := processStart(boot, pid)
			if err != nil {
				continue // exited since the list was read
			}
			if first, ok := out[s.Name]; !ok || t.Before(first) {
				out[s.Name] = t
			}
		}
		if _, ok := out[s.Name]; !ok {
			return nil, fmt.Errorf("container %s: its processes %v exited", s.Name, pids)
		}
	}
	return out, nil
}

// CgroupMemory is one container's memory as its cgroup accounts it, in bytes.
// On cgroup v2 Usage and Peak are memory.current and memory.peak; on v1 (this
// kind of host) memory.usage_in_bytes and memory.max_usage_in_bytes, the same
// quantities. Both include the page cache the container's writes leave (a
// disk-backed /tmp's files) and its tmpfs pages. Anon is the anonymous memory
// (v1 rss, v2 anon): the processes' heaps and stacks, what RSS mostly is.
type CgroupMemory struct {
	Usage, Peak, Anon, Cache int64
	Version                  int
}

// ContainerMemory reads the memory cgroup of each running container of pod.
func (n *Node) ContainerMemory(pod *corev1.Pod) (map[string]CgroupMemory, error) {
	out := map[string]CgroupMemory{}
	for _, s := range AllStatuses(pod) {
		if s.State.Running == nil {
			continue
		}
		d, err := n.containerCgroup(s, "memory")
		if err != nil {
			return nil, err
		}
		m, err := readCgroupMemory(d)
		if err != nil {
			return nil, fmt.Errorf("container %s: %w", s.Name, err)
		}
		out[s.Name] = m
	}
	return out, nil
}

// readCgroupMemory reads a v2 memory cgroup's files, or else a v1 one's.
func readCgroupMemory(d string) (CgroupMemory, error) {
	num := func(file string) (int64, error) {
		b, err := os.ReadFile(filepath.Join(d, file))
		if err != nil {
			return 0, err
		}
		return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	}
	stat := map[string]int64{}
	if b, err := os.ReadFile(filepath.Join(d, "memory.stat")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, " "); ok {
				stat[k], _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	var m CgroupMemory
	var err1, err2 error
	if _, err := os.Stat(filepath.Join(d, "memory.current")); err == nil {
		m.Version = 2
		m.Usage, err1 = num("memory.current")
		m.Peak, err2 = num("memory.peak")
		m.Anon, m.Cache = stat["anon"], stat["file"]
	} else {
		m.Version = 1
		m.Usage, err1 = num("memory.usage_in_bytes")
		m.Peak, err2 = num("memory.max_usage_in_bytes")
		m.Anon, m.Cache = stat["rss"], stat["cache"]
	}
	return m, errors.Join(err1, err2)
}

// FatalWaiting reports whether a container waiting for reason will never
// start by itself (WaitPodReady's list), for waits of their own.
func FatalWaiting(reason string) bool { return fatalWaiting[reason] }

// kubeletAddr is where the node's kubelet serves its API (address 127.0.0.1,
// the default port), on the node namespace's loopback.
const kubeletAddr = "127.0.0.1:10250"

// PLEGRelists is the kubelet's own account of its pod lifecycle event
// generator's relists since it started: how many it ran, the summed time
// between the starts of consecutive relists, and the summed time the relists
// took. The difference of two readings is what happened in between.
type PLEGRelists struct {
	Count              float64
	Interval, Duration time.Duration
}

// Minus is p's relists since an earlier reading.
func (p PLEGRelists) Minus(before PLEGRelists) PLEGRelists {
	return PLEGRelists{p.Count - before.Count, p.Interval - before.Interval, p.Duration - before.Duration}
}

// PLEGRelists reads the kubelet's pleg_relist_interval_seconds and
// pleg_relist_duration_seconds histograms from its /metrics: the kubelet
// decides what to start next only on a fresh relist, so their period is the
// step of every container the kubelet starts in a later sync.
func (n *Node) PLEGRelists() (PLEGRelists, error) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(_ context.Context, _, addr string) (net.Conn, error) { return n.ns.Dial(addr, 5*time.Second) },
		// The kubelet's serving certificate is the self-signed one it made
		// at start; the connection never leaves the node's loopback.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("https://" + kubeletAddr + "/metrics")
	if err != nil {
		return PLEGRelists{}, fmt.Errorf("the kubelet's metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return PLEGRelists{}, fmt.Errorf("the kubelet's metrics: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return PLEGRelists{}, fmt.Errorf("the kubelet's metrics: %s: %.200s", resp.Status, body)
	}
	values := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if f := strings.Fields(line); len(f) == 2 && strings.HasPrefix(f[0], "kubelet_pleg_relist_") {
			values[f[0]], _ = strconv.ParseFloat(f[1], 64)
		}
	}
	const interval, duration = "kubelet_pleg_relist_interval_seconds", "kubelet_pleg_relist_duration_seconds"
	for _, k := range []string{interval + "_count", interval + "_sum", duration + "_sum"} {
		if _, ok := values[k]; !ok {
			return PLEGRelists{}, fmt.Errorf("the kubelet's metrics have no %s", k)
		}
	}
	secs := func(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }
	return PLEGRelists{Count: values[interval+"_count"], Interval: secs(values[interval+"_sum"]),
		Duration: secs(values[duration+"_sum"])}, nil
}

// ContainerRoot is the root filesystem of a running container of pod as the
// host sees it: /proc/PID/root of a process in the container's cgroup.
func (n *Node) ContainerRoot(pod *corev1.Pod, container string) (string, error) {
	for _, s := range AllStatuses(pod) {
		if s.Name != container || s.State.Running == nil {
			continue
		}
		pids, err := n.containerPIDs(s)
		if err != nil {
			return "", err
		}
		return "/proc/" + pids[0] + "/root", nil
	}
	return "", fmt.Errorf("pod %s has no running container %s", pod.Name, container)
}

// containerPIDs are the processes in a running container's pids cgroup, at
// least one.
func (n *Node) containerPIDs(s corev1.ContainerStatus) ([]string, error) {
	d, err := n.containerCgroup(s, "pids")
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	pids := strings.Fields(string(b))
	if len(pids) == 0 {
		return nil, fmt.Errorf("container %s has no process in %s", s.Name, d)
	}
	return pids, nil
}
