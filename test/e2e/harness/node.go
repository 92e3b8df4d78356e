package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Node is a real Kubernetes node next to the control plane: Debian's
// containerd and runc, the CNI bridge plugin, and the pinned kubelet, all in
// namespaces of their own (nodeNS), running pods from locally built images.
type Node struct {
	Name   string
	Dir    string
	Socket string // containerd's
	ns     *nodeNS
	cp     *ControlPlane
	rec    *nodeRecord
	fwd    io.Closer
	// exposed are the relays of Expose.
	exposed []io.Closer
	logTo   io.Writer

	containerd, kubelet *Process
}

const (
	// NodeName is the node's name; pods land on it by spec.nodeName (the
	// suite runs no scheduler).
	NodeName = "e2e-node"
	// NodeIP is the node's address, on a veth pair whose both ends are inside
	// its namespace (this kernel has no dummy links; TEST-NET-1 is routed
	// nowhere): the kubelet will not take a loopback address.
	NodeIP = "192.0.2.10"
	// PodGateway is the CNI bridge's address in the node's namespace, which
	// pods reach: node-side services for pods (Redis) listen there.
	PodGateway = "10.85.0.1"
	podSubnet  = "10.85.0.0/24"
	// SandboxImage is the pod sandbox image (PauseImage).
	SandboxImage = "e2e.local/pause:1"
)

// ErrNotRoot is why the real node cannot start for a user without root.
var ErrNotRoot = errors.New("the real node needs root (containerd, runc, the kubelet, network and mount namespaces, cgroups): " +
	"run `make test` as root (CI does), or `make test-no-node` for everything else")

// StartNode starts containerd and the kubelet in a new network and mount
// namespace under dir (short: unix socket paths), imports the image archives
// and waits for the node to be Ready. Whatever happens, Stop (or, for a killed
// run, the next StartNode) puts the host back.
func StartNode(cp *ControlPlane, dir string, images []string, logTo io.Writer) (_ *Node, err error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	kubelet, err := Tool("kubelet")
	if err != nil {
		return nil, err
	}
	for _, t := range []string{"containerd", "ctr", "runc", "unshare", "nsenter", "ip"} {
		if _, err := exec.LookPath(t); err != nil {
			return nil, fmt.Errorf("%s is missing: hack/tools.sh containerd runc cni-plugins iptables busybox installs the node's Debian packages: %w", t, err)
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		return nil, fmt.Errorf("the CNI bridge plugin is missing (hack/tools.sh cni-plugins): %w", err)
	}
	if err := RestoreLeftovers(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	n := &Node{Name: NodeName, Dir: dir, Socket: filepath.Join(dir, "containerd.sock"), cp: cp, logTo: logTo}
	n.rec = &nodeRecord{Dir: dir, Socket: n.Socket, PID: os.Getpid(), Sysctls: map[string]string{},
		CgroupRoot: fmt.Sprintf("/cmpe2e-%d-%d", os.Getpid(), time.Now().Unix())}
	for _, k := range kubeletSysctls {
		if v, err := readSysctl(k); err == nil {
			n.rec.Sysctls[k] = v
		}
	}
	// The record first: from here on, a killed run is undone by the next.
	if err := n.rec.save(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			n.Stop()
		}
	}()
	if err := createCgroupRoot(n.rec.CgroupRoot); err != nil {
		return nil, err
	}
	if n.ns, err = startNodeNS(dir, logTo); err != nil {
		return nil, err
	}
	if err := n.run("network", "sh", "-c", fmt.Sprintf(
		"ip link add e2e0 type veth peer name e2e1 && ip addr add %s/24 dev e2e0 && ip link set e2e1 up && ip link set e2e0 up && ip route add default dev e2e0", NodeIP)); err != nil {
		return nil, err
	}
	if err := n.startContainerd(); err != nil {
		return nil, err
	}
	for _, img := range images {
		if err := n.run("import "+filepath.Base(img), "ctr", "-a", n.Socket, "-n", "k8s.io", "images", "import", img); err != nil {
			return nil, err
		}
	}
	if err := n.startKubelet(kubelet); err != nil {
		return nil, err
	}
	return n, nil
}

// run runs argv inside the node's namespaces and fails with its output.
func (n *Node) run(what string, argv ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	full := n.ns.enter(false, argv...)
	out, err := exec.CommandContext(ctx, full[0], full[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("node %s (%s): %w\n%s", what, strings.Join(argv, " "), err, out)
	}
	return nil
}

func (n *Node) startContainerd() error {
	cfg := filepath.Join(n.Dir, "containerd.toml")
	cni := filepath.Join(n.Dir, "cni")
	if err := os.MkdirAll(cni, 0o755); err != nil {
		return err
	}
	// restrict_oom_score_adj: root here lacks CAP_SYS_RESOURCE, so runc cannot
	// lower a sandbox's oom_score_adj and every sandbox would fail with "can't
	// get final child's PID from pipe: EOF". The opt plugin would create
	// /opt/containerd on the host.
	toml := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]
[grpc]
  address = %[3]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[4]q
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[5]q
`, filepath.Join(n.Dir, "containerd", "root"), filepath.Join(n.Dir, "containerd", "state"), n.Socket, SandboxImage, cni)
	if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
		return err
	}
	// The bridge's IPAM state lives in the run's directory too.
	conflist := fmt.Sprintf(`{"cniVersion": "0.4.0", "name": "e2e", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": %q, "gateway": %q}]], "dataDir": %q}}]}
`, podSubnet, PodGateway, filepath.Join(n.Dir, "cni-ipam"))
	if err := os.WriteFile(filepath.Join(cni, "10-bridge.conflist"), []byte(conflist), 0o644); err != nil {
		return err
	}
	var err error
	n.containerd, err = Start("containerd", n.ns.enter(false, "containerd", "--config", cfg), nil, n.Dir, n.logTo)
	if err != nil {
		return err
	}
	return Eventually(30*time.Second, 50*time.Millisecond, func() (bool, error) {
		if done, werr := n.containerd.Exited(); done {
			return false, Final(fmt.Errorf("containerd exited: %w\n%s", werr, tail(n.containerd.Output(), 4000)))
		}
		err := exec.Command("ctr", "-a", n.Socket, "version").Run()
		return err == nil, fmt.Errorf("containerd not answering on %s: %w", n.Socket, err)
	})
}

func (n *Node) startKubelet(bin string) error {
	u, err := url.Parse(n.cp.URL)
	if err != nil {
		return err
	}
	addr, fwd, err := n.ns.forward(u.Host)
	if err != nil {
		return err
	}
	n.fwd = fwd
	kubeconfig := filepath.Join(n.Dir, "kubelet.kubeconfig")
	if err := n.cp.writeKubeconfig(kubeconfig, "https://"+addr); err != nil {
		return err
	}
	resolv := filepath.Join(n.Dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("# the node has no DNS; pods use addresses\n"), 0o644); err != nil {
		return err
	}
	// failCgroupV1: this machine has cgroup v1. cgroupRoot: the run's own
	// cgroups, removed afterwards. evictionHard {}: no eviction on a shared
	// disk. Anonymous AlwaysAllow on the kubelet's API: it listens only on the
	// node namespace's loopback.
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: %[1]s
cgroupsPerQOS: true
enforceNodeAllocatable: []
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: unix://%[2]s
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
address: 127.0.0.1
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
resolvConf: %[3]s
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {}
evictionPressureTransitionPeriod: 0s
localStorageCapacityIsolation: false
nodeStatusUpdateFrequency: 2s
syncFrequency: 5s
`, n.rec.CgroupRoot, n.Socket, resolv)
	cfgFile := filepath.Join(n.Dir, "kubelet.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		return err
	}
	n.kubelet, err = Start("kubelet", n.ns.enter(false, bin, "--config="+cfgFile, "--kubeconfig="+kubeconfig,
		"--root-dir="+filepath.Join(n.Dir, "kubelet"), "--hostname-override="+n.Name, "--node-ip="+NodeIP, "--v=1"),
		nil, n.Dir, n.logTo)
	if err != nil {
		return err
	}
	c := n.cp.Client()
	return Eventually(60*time.Second, 200*time.Millisecond, func() (bool, error) {
		if done, werr := n.kubelet.Exited(); done {
			return false, Final(fmt.Errorf("kubelet exited: %w\n%s", werr, tail(n.kubelet.Output(), 6000)))
		}
		var node corev1.Node
		if err := c.Get("/api/v1/nodes/"+n.Name, &node); err != nil {
			return false, err
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue, fmt.Errorf("node %s Ready=%s: %s", n.Name, cond.Status, cond.Message)
			}
		}
		return false, fmt.Errorf("node %s has no Ready condition yet", n.Name)
	})
}

// Command is a host binary to run inside the node's network namespace only
// (repoclient dialling a pod's address).
func (n *Node) Command(argv ...string) *exec.Cmd {
	full := n.ns.enter(true, argv...)
	return exec.Command(full[0], full[1:]...)
}

// Expose makes target, a server on the host's loopback (Vault), reachable
// from the pods: a relay listens on every address of the node's namespace and
// the pods dial PodGateway at the returned address. The relay ends with Stop.
func (n *Node) Expose(target string) (string, error) {
	addr, c, err := n.ns.forwardFrom("0.0.0.0:0", target)
	if err != nil {
		return "", err
	}
	n.exposed = append(n.exposed, c)
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(PodGateway, port), nil
}

// StartIn starts a long-running host binary inside the node's network
// namespace (a service the pods reach at PodGateway).
func (n *Node) StartIn(name string, argv []string, dir string) (*Process, error) {
	return Start(name, n.ns.enter(true, argv...), nil, dir, n.logTo)
}

// ContainerLogs are the kubelet's log files of the pod's containers (under
// the node's private /var/log), by container name; restarts are appended.
func (n *Node) ContainerLogs(pod *corev1.Pod) map[string]string {
	dir := filepath.Join(n.Dir, "ns-var-log", "pods", pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))
	out := map[string]string{}
	ctrs, _ := os.ReadDir(dir)
	for _, c := range ctrs {
		files, _ := filepath.Glob(filepath.Join(dir, c.Name(), "*.log"))
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil {
				out[c.Name()] += string(b)
			}
		}
	}
	return out
}

// Stop ends the kubelet, every container, containerd and the namespaces, then
// restores the host (cgroups, kernel tunables) and removes the node object.
func (n *Node) Stop() {
	if n.kubelet != nil {
		_ = n.kubelet.Stop(10 * time.Second)
	}
	_ = killCgroupProcs(n.rec.CgroupRoot)
	if n.containerd != nil {
		_ = n.containerd.Stop(10 * time.Second)
	}
	for _, c := range n.exposed {
		_ = c.Close()
	}
	if n.fwd != nil {
		_ = n.fwd.Close()
	}
	if n.ns != nil {
		n.ns.stop()
	}
	if err := n.rec.restore(); err != nil && n.logTo != nil {
		fmt.Fprintf(n.logTo, "node: restoring the host: %v\n", err)
	}
	_ = n.cp.Client().Delete("/api/v1/nodes/" + n.Name)
}

// WaitPodReady waits until the kubelet reports the pod Ready, and fails at
// once, with the container's log, when a container cannot start (an image the
// node lacks, a crash loop, a bad spec).
func (n *Node) WaitPodReady(c *Client, ns, name string, timeout time.Duration) (*corev1.Pod, error) {
	var pod *corev1.Pod
	var fatal error // ends the wait at once
	err := Eventually(timeout, 200*time.Millisecond, func() (bool, error) {
		var err error
		if pod, err = c.GetPod(ns, name); err != nil {
			var apiErr *APIError
			if errors.As(err, &apiErr) && apiErr.Code == http.StatusNotFound {
				fatal = fmt.Errorf("pod %s/%s is gone", ns, name)
				return true, nil
			}
			return false, err
		}
		all := AllStatuses(pod)
		for _, s := range all {
			if w := s.State.Waiting; w != nil && fatalWaiting[w.Reason] {
				fatal = fmt.Errorf("container %s of pod %s: %s: %s\n%s", s.Name, name, w.Reason, w.Message, n.ContainerLogs(pod)[s.Name])
				return true, nil
			}
		}
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		states := make([]string, 0, len(all))
		for _, s := range all {
			states = append(states, s.Name+" "+DescribeState(s))
		}
		return false, fmt.Errorf("pod %s not Ready: phase %s, %s", name, pod.Status.Phase, strings.Join(states, ", "))
	})
	if fatal != nil {
		return pod, fatal
	}
	return pod, err
}

// fatalWaiting are the waiting reasons no amount of waiting fixes.
var fatalWaiting = map[string]bool{"ErrImageNeverPull": true, "ErrImagePull": true, "ImagePullBackOff": true,
	"CrashLoopBackOff": true, "CreateContainerError": true, "CreateContainerConfigError": true, "InvalidImageName": true,
	"RunContainerError": true}

// AllStatuses are the pod's init container statuses, then its containers'.
func AllStatuses(pod *corev1.Pod) []corev1.ContainerStatus {
	return append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
}

// DescribeState says what the kubelet reports of a container, for messages.
func DescribeState(s corev1.ContainerStatus) string {
	switch {
	case s.State.Running != nil:
		return fmt.Sprintf("running since %s (ready %v)", s.State.Running.StartedAt.Format(time.RFC3339), s.Ready)
	case s.State.Waiting != nil:
		return "waiting: " + s.State.Waiting.Reason + " " + s.State.Waiting.Message
	case s.State.Terminated != nil:
		return fmt.Sprintf("terminated: %s, exit %d", s.State.Terminated.Reason, s.State.Terminated.ExitCode)
	}
	return "no state"
}

// ProcessUIDs are the real user IDs of the processes of each running
// container of pod, read from the host's /proc through the container's cgroup.
func (n *Node) ProcessUIDs(pod *corev1.Pod) (map[string][]int, error) {
	out := map[string][]int{}
	for _, s := range AllStatuses(pod) {
		if s.State.Running == nil {
			continue
		}
		_, id, _ := strings.Cut(s.ContainerID, "://")
		for _, d := range cgroupDirs(n.rec.CgroupRoot) {
			if filepath.Base(d) != id || !strings.Contains(d, "/pids/") {
				continue
			}
			b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			if err != nil {
				return nil, err
			}
			for _, f := range strings.Fields(string(b)) {
				st, err := os.ReadFile("/proc/" + f + "/status")
				if err != nil {
					continue
				}
				for _, line := range strings.Split(string(st), "\n") {
					if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
						if u := strings.Fields(rest); len(u) > 0 {
							uid, _ := strconv.Atoi(u[0])
							out[s.Name] = append(out[s.Name], uid)
						}
					}
				}
			}
		}
	}
	return out, nil
}

// VolumeFile is a file of a pod's volume as the kubelet wrote it on the node,
// e.g. a downwardAPI projection. Such volumes are tmpfs mounts in the node's
// mount namespace, so the path goes through the holder's /proc/PID/root.
func (n *Node) VolumeFile(pod *corev1.Pod, plugin, volume, file string) string {
	return filepath.Join("/proc/"+strconv.Itoa(n.ns.holder.PID())+"/root",
		n.Dir, "kubelet", "pods", string(pod.UID), "volumes", plugin, volume, file)
}
