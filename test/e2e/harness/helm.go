package harness

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// Helm runs the real, pinned helm against the control plane.
type Helm struct {
	Bin        string
	Kubeconfig string
	// Home keeps helm's cache, config and data out of the user's home.
	Home string
}

// NewHelm returns helm from bin/ with its own home under dir.
func (cp *ControlPlane) NewHelm(dir string) (*Helm, error) {
	bin, err := Tool("helm")
	if err != nil {
		return nil, err
	}
	return &Helm{Bin: bin, Kubeconfig: cp.Kubeconfig, Home: dir}, nil
}

// Run runs helm with args and returns its combined output.
func (h *Helm) Run(args ...string) (string, error) {
	cmd := exec.Command(h.Bin, append(args, "--kubeconfig", h.Kubeconfig)...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(h.Home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(h.Home, "config"),
		"HELM_DATA_HOME="+filepath.Join(h.Home, "data"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// InjectorImage is the image repository the chart runs the injector from; a
// booted injector pod runs the freshly built binary in its place.
const InjectorImage = "ghcr.io/cmp-injector/cmp-injector"

// BootChartInjector runs the injector container of the Deployment the chart
// installed (ns/name) as the kubelet would: its own args, its catalog ConfigMap
// and TLS Secret projected from the apiserver. The one liberty: its listen
// addresses (":8443", ":8080") become free loopback ports, because every booted
// pod shares this machine's network namespace; the chart's webhook.url must
// then point at the returned injector's URL, which the caller arranges by
// choosing the port first (port).
func BootChartInjector(c *Client, ns, name, bin, root string, port int, logTo io.Writer) (*Injector, *BootedPod, error) {
	var dep appsv1.Deployment
	if err := c.Get("/apis/apps/v1/namespaces/"+ns+"/deployments/"+name, &dep); err != nil {
		return nil, nil, err
	}
	pod := &corev1.Pod{ObjectMeta: dep.Spec.Template.ObjectMeta, Spec: dep.Spec.Template.Spec}
	pod.Namespace, pod.Name = ns, name+"-booted"
	mport, err := FreePort()
	if err != nil {
		return nil, nil, err
	}
	listen := map[string]string{
		"--listen":         "127.0.0.1:" + strconv.Itoa(port),
		"--metrics-listen": "127.0.0.1:" + strconv.Itoa(mport),
	}
	// What the kubelet mounts for the pod's service account, as a kubeconfig:
	// the reconciler then has the chart's RBAC and nothing more.
	kubeconfig := filepath.Join(root, "serviceaccount.kubeconfig")
	if pod.Spec.AutomountServiceAccountToken != nil && *pod.Spec.AutomountServiceAccountToken {
		if err := os.MkdirAll(root, 0o755); err != nil {
			return nil, nil, err
		}
		if err := c.ServiceAccountKubeconfig(ns, pod.Spec.ServiceAccountName, kubeconfig); err != nil {
			return nil, nil, err
		}
	}
	booted, err := BootPod(pod, BootOptions{
		Root:        root,
		Run:         func(string) bool { return true },
		Entrypoints: map[string][]string{InjectorImage: {bin}},
		Objects:     c,
		LogTo:       logTo,
		Rewrite: func(_ corev1.Container, argv []string) []string {
			for i, a := range argv {
				if k, _, ok := strings.Cut(a, "="); ok && listen[k] != "" {
					argv[i] = k + "=" + listen[k]
				}
			}
			// The reconciler and the dry run of nativeSidecars: auto
			// use the API; a pod that mounts no token has no API access.
			if pod.Spec.AutomountServiceAccountToken != nil && *pod.Spec.AutomountServiceAccountToken {
				argv = append(argv, "--kubeconfig="+kubeconfig)
			}
			// No load balancer needs time to take the pod out of rotation here.
			return append(argv, "--shutdown-delay=0s")
		},
	})
	if err != nil {
		return nil, nil, err
	}
	procs := booted.Processes()
	if len(procs) != 1 {
		booted.Stop()
		return nil, nil, fmt.Errorf("the chart's injector pod runs %d containers, want 1", len(procs))
	}
	in := &Injector{Bin: bin, Dir: root, Port: port, proc: procs[0],
		MetricsURL: fmt.Sprintf("http://127.0.0.1:%d", mport)}
	if err := in.waitReady(); err != nil {
		booted.Stop()
		return nil, nil, err
	}
	return in, booted, nil
}

// waitReady waits until /readyz is 200.
func (in *Injector) waitReady() error {
	return in.proc.WaitHTTPOK("cmp-injector", in.MetricsURL+"/readyz", 30*time.Second, 50*time.Millisecond)
}

// FirstLines is the first n lines of s (for printing helm's output).
func FirstLines(s string, n int) string {
	lines := strings.SplitAfterN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "")
}
