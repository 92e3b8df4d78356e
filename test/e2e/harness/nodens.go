package harness

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// nodeNS is the network and mount namespace the real node lives in: containerd,
// the kubelet, their mounts (the kubelet's root, container root filesystems,
// pod network namespaces), iptables rules, the CNI bridge and the pod network
// never reach the host's. The holder process keeps the namespaces alive; every
// node process enters them with nsenter.
//
// Inside, the host's /run, /var/lib and /var/log are the run's own directories,
// because containerd's shims (/run/containerd), the CNI plugins' state
// (/var/lib/cni) and the kubelet's container logs (/var/log/pods) use those
// fixed paths whatever the configuration says.
type nodeNS struct {
	holder *Process
	dir    string
}

// nsPrivateDirs are the host paths the namespace replaces with run directories.
var nsPrivateDirs = []string{"/run", "/var/lib", "/var/log"}

func startNodeNS(dir string, logTo io.Writer) (*nodeNS, error) {
	script := "set -e\nip link set lo up\n"
	for _, p := range nsPrivateDirs {
		own := filepath.Join(dir, "ns"+strings.ReplaceAll(p, "/", "-"))
		if err := os.MkdirAll(own, 0o755); err != nil {
			return nil, err
		}
		script += fmt.Sprintf("mount --bind %s %s\n", own, p)
	}
	// The holder prints once everything is in place, then only waits.
	script += "echo namespace-ready\nexec sleep 2147483647\n"
	holder, err := Start("node-namespace", []string{"unshare", "--mount", "--net", "--propagation", "private",
		"--", "/bin/sh", "-c", script}, nil, dir, logTo)
	if err != nil {
		return nil, err
	}
	ns := &nodeNS{holder: holder, dir: dir}
	err = Eventually(10*time.Second, 20*time.Millisecond, func() (bool, error) {
		if done, werr := holder.Exited(); done {
			return false, fmt.Errorf("creating the node's namespaces failed: %w\n%s", werr, holder.Output())
		}
		return strings.Contains(holder.Output(), "namespace-ready"), nil
	})
	if err != nil {
		_ = holder.Stop(time.Second)
		return nil, err
	}
	return ns, nil
}

// enter prefixes argv so that it runs inside the node's namespaces; netOnly
// keeps the host's mount namespace (for host tools that only need the network).
func (ns *nodeNS) enter(netOnly bool, argv ...string) []string {
	pre := []string{"nsenter", "--target", strconv.Itoa(ns.holder.PID()), "--net"}
	if !netOnly {
		pre = append(pre, "--mount")
	}
	return append(append(pre, "--"), argv...)
}

// inNet runs f on an OS thread that has joined the node's network namespace:
// sockets f creates belong to it and keep working from any goroutine.
func (ns *nodeNS) inNet(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		// The thread is returned to the runtime only once it is back in the
		// host's namespace; if that fails it ends with this goroutine.
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer self.Close()
		target, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", ns.holder.PID()))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns into the node's network namespace: %w", err)
			return
		}
		ferr := f()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns back to the host: %w", err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Dial connects to addr from inside the node's network namespace (a pod IP, or
// a port only the node's loopback has).
func (ns *nodeNS) Dial(addr string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := ns.inNet(func() (err error) {
		c, err = net.DialTimeout("tcp", addr, timeout)
		return err
	})
	return c, err
}

// forward listens on the node's loopback and relays every connection to the
// host's target (the kube-apiserver): the kubelet reaches the control plane
// with no route between the namespaces. It returns the node-side address.
func (ns *nodeNS) forward(target string) (string, io.Closer, error) {
	return ns.forwardFrom("127.0.0.1:0", target)
}

// forwardFrom is forward with the node-side address to listen on.
func (ns *nodeNS) forwardFrom(listen, target string) (string, io.Closer, error) {
	var l net.Listener
	if err := ns.inNet(func() (err error) {
		l, err = net.Listen("tcp", listen)
		return err
	}); err != nil {
		return "", nil, err
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go relay(c, target)
		}
	}()
	return l.Addr().String(), l, nil
}

func relay(c net.Conn, target string) {
	defer c.Close()
	u, err := net.DialTimeout("tcp", target, 10*time.Second)
	if err != nil {
		return
	}
	defer u.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(u, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, u); done <- struct{}{} }()
	<-done
}

// stop ends the holder; the namespaces go with the last process in them.
func (ns *nodeNS) stop() { _ = ns.holder.Stop(2 * time.Second) }
