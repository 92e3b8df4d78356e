package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// startPods is how many pods of each size checkStartOrder runs: enough for a
// median, few enough for the node's few minutes.
const startPods = 5

// startStandIn is the repo-server stand-in of the start pods: when the kubelet
// starts it, every plugin's socket must already answer CheckPluginConfiguration
// (the copied cmp-server asks it as the repo-server would), and there must be
// as many sockets as plugins; otherwise it exits 1, the kubelet restarts it,
// and the restart count says so.
func startStandIn(plugins int) []string {
	return []string{"sh", "-c", fmt.Sprintf(`n=0
for s in %[1]s/*.sock; do
  %[2]s call --socket "$s" --timeout 2s check >/dev/null || { echo "$s does not answer"; exit 1; }
  n=$((n+1))
done
[ "$n" -ge %[3]d ] || { echo "$n sockets, want %[3]d"; exit 1; }
exec sleep 3600`, keys.PluginSocketDir, keys.PluginServerPath, plugins)}
}

// startPod is argo-helm's repo-server pod (the golden input) asking for
// plugins, its repo-server container the stand-in above.
func startPod(t *testing.T, name string, plugins []string) *corev1.Pod {
	t.Helper()
	pod := goldenPod(t, "argo-helm-repo-server.yaml")
	pod.Name = name
	pod.Annotations[keys.PluginsAnnotation] = strings.Join(plugins, ", ")
	pod.Spec.NodeName = harness.NodeName
	pod.Spec.ServiceAccountName = ""
	grace := int64(1)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	pod.Spec.InitContainers = nil
	rs := &pod.Spec.Containers[0]
	rs.Image = "registry.example/e2e/shell:1"
	rs.Args = nil
	rs.Command = startStandIn(len(plugins))
	rs.Env = nil
	rs.Ports = nil
	rs.ReadinessProbe, rs.LivenessProbe = nil, nil
	// Argo CD's UID, as the image is the shell's (root by default).
	uid := int64(999)
	if rs.SecurityContext == nil {
		rs.SecurityContext = &corev1.SecurityContext{}
	}
	rs.SecurityContext.RunAsUser = &uid
	rs.VolumeMounts = []corev1.VolumeMount{
		{Name: "plugins", MountPath: keys.PluginSocketDir},
		{Name: keys.VarFilesVolume, MountPath: keys.VarFilesMountPath, ReadOnly: true},
		{Name: "tmp", MountPath: "/tmp"},
	}
	return pod
}

// checkStartOrder runs pods with one and with four plugins on the node, each
// size both with the start gate the injector builds (the postStart hook) and
// with the one it built before (the startupProbe: exec cmp-server probe, a
// second apart, the binary's probe unchanged), alternately, so both gates see
// the same node. For every pod the kubelet keeps the order (each native
// sidecar started before the next container, the repo-server last) and the
// repo-server's first run finds every socket answering. The test prints how
// long each pod took from its creation to the repo-server container's start,
// from the kubelet's own status timestamps (which have a resolution of one
// second) and, to the clock tick, from the create request to the repo-server's
// first process (read from the node). No time is asserted: the figures are for
// the report.
func checkStartOrder(t *testing.T, node *harness.Node) {
	c := env.cp.Client()
	// params first: the 1-plugin pod keeps the copy init container (params'
	// entry has no serverPath), which the stand-in and the startupProbe
	// variant run as the repo-server's client. A pod of library plugins
	// alone has no copy (serverPath): its start is the bench's to measure.
	all := []string{"params", "helm", "kustomize", "broken"}
	gates := []string{"postStart hook", "former startupProbe"}
	for _, n := range []int{1, 4} {
		took := map[string][]time.Duration{}
		exact := map[string][]time.Duration{}
		for i := range startPods {
			for _, gate := range gates {
				name := fmt.Sprintf("start-%dp-%d-hook", n, i)
				pod := startPod(t, name, all[:n])
				if gate != gates[0] {
					// The injector's own output for the same pod, then
					// the gate of the injector before.
					name = fmt.Sprintf("start-%dp-%d-probe", n, i)
					pod.Name = name
					dry, err := c.CreatePod(chainNS, pod, true)
					if err != nil {
						t.Fatal(err)
					}
					pod = uninjected(dry, name)
					withStartupProbeGate(pod)
				}
				sent := time.Now()
				created, err := c.CreatePod(chainNS, pod, false)
				if err != nil {
					t.Fatal(err)
				}
				path := "/api/v1/namespaces/" + chainNS + "/pods/" + created.Name
				ready, err := node.WaitPodReady(c, chainNS, created.Name, 3*time.Minute)
				if err != nil {
					_ = c.Delete(path)
					t.Fatal(err)
				}
				checkNativeStart(t, ready)
				rs := ready.Status.ContainerStatuses[0]
				d := rs.State.Running.StartedAt.Sub(ready.CreationTimestamp.Time)
				took[gate] = append(took[gate], d)
				// The same interval to the clock tick: from the create
				// request to the repo-server's first process.
				starts, err := node.ProcessStarts(ready)
				if err != nil {
					t.Fatal(err)
				}
				e := starts[rs.Name].Sub(sent).Round(10 * time.Millisecond)
				exact[gate] = append(exact[gate], e)
				t.Logf("%d plugin(s), %s, pod %s: created %s → repo-server started %s (%s by the kubelet's timestamps, %s from the create request to its process); %s",
					n, gate, created.Name, stamp(ready.CreationTimestamp), stamp(rs.State.Running.StartedAt), d, e, sidecarStarts(ready, starts, sent))
				// One pod on the node at a time.
				if err := c.Delete(path); err != nil {
					t.Error(err)
				}
				if err := harness.Eventually(60*time.Second, 100*time.Millisecond, func() (bool, error) {
					_, err := c.GetPod(chainNS, created.Name)
					return err != nil && strings.Contains(err.Error(), "404"), fmt.Errorf("pod %s still exists: %w", created.Name, err)
				}); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, gate := range gates {
			slices.Sort(took[gate])
			slices.Sort(exact[gate])
			t.Logf("%d plugin(s), %s: pod creation → repo-server started, median of %d pods: %s by the kubelet's timestamps (1 s resolution; all %v), %s from the create request to the repo-server's process (all %v)",
				n, gate, len(took[gate]), took[gate][len(took[gate])/2], took[gate], exact[gate][len(exact[gate])/2], exact[gate])
		}
	}
}

// withStartupProbeGate gives pod's native sidecars the start gate of the
// injector before the postStart hook: an exec startupProbe running
// cmp-server probe once a second, for at most a minute.
func withStartupProbeGate(pod *corev1.Pod) {
	for i := range pod.Spec.InitContainers {
		ic := &pod.Spec.InitContainers[i]
		// The sockets container's gate is not a plugin's: it keeps its hook.
		if ic.Lifecycle == nil || ic.Lifecycle.PostStart == nil || ic.Name == keys.SocketsContainer {
			continue
		}
		ic.Lifecycle = nil
		ic.TerminationMessagePolicy = corev1.TerminationMessageReadFile
		ic.StartupProbe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{keys.PluginServerPath, "probe"}}},
			PeriodSeconds: 1, FailureThreshold: 60, TimeoutSeconds: 3,
		}
	}
}

// uninjected is the injected (dry-run) pod dry as a pod of its own named
// name: without the opt-in label and annotation the webhook passes it as it
// is, and without the injector's status the reconciler does not look at it.
func uninjected(dry *corev1.Pod, name string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: dry.Namespace, Annotations: map[string]string{}, Labels: map[string]string{}},
		Spec: *dry.Spec.DeepCopy()}
	for k, v := range dry.Annotations {
		if k != keys.StatusAnnotation && k != keys.PluginsAnnotation {
			pod.Annotations[k] = v
		}
	}
	for k, v := range dry.Labels {
		if k != keys.InjectLabel {
			pod.Labels[k] = v
		}
	}
	withoutAPIToken(pod)
	return pod
}

func stamp(t metav1.Time) string { return t.UTC().Format("15:04:05") }

// sidecarStarts lists when each native sidecar's process started, after the
// create request, for the log.
func sidecarStarts(pod *corev1.Pod, starts map[string]time.Time, sent time.Time) string {
	var out []string
	for _, s := range pod.Status.InitContainerStatuses {
		if at, ok := starts[s.Name]; ok {
			out = append(out, fmt.Sprintf("%s +%s", s.Name, at.Sub(sent).Round(10*time.Millisecond)))
		}
	}
	return "sidecars started " + strings.Join(out, ", ")
}

// checkFailingPlugin runs, as the injector builds it, a pod with two plugins
// whose first plugin's server cannot start, in two ways: its plugin.yaml is
// not a plugin's (the server exits at once, before the gate can even run, and
// says why in its log, which FallbackToLogsOnError makes the container's
// termination message), and its server never listens (a sidecar whose command
// only sleeps, the gate's timeout shortened to 3 s: the gate's own reason,
// written to the termination log, names the plugin). Either way the kubelet
// keeps the next sidecar and the repo-server from starting, and the pod's
// status names the plugin's container and says why. Each pod is the
// injector's output for the same request with that change, made a pod of its
// own (uninjected), so neither the webhook nor the reconciler repairs it.
func checkFailingPlugin(t *testing.T, node *harness.Node) {
	c := env.cp.Client()
	// The webhook's own output for two plugins of inline configs, as the
	// apiserver stored it.
	dry, err := c.CreatePod(chainNS, startPod(t, "failing-template", []string{"params", "broken"}), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(dry.Spec.InitContainers) != 4 || !strings.HasPrefix(dry.Spec.InitContainers[1].Name, keys.SidecarPrefix) {
		t.Fatalf("the injector did not inject two plugins: %v", containerNamesOf(dry.Spec.InitContainers))
	}
	first := dry.Spec.InitContainers[1].Name
	plugin := strings.TrimPrefix(first, keys.SidecarPrefix)

	t.Run("plugin.yaml no server can serve", func(t *testing.T) {
		pod := uninjected(dry, "failing-config")
		if _, ok := pod.Annotations[keys.ConfigAnnotationPrefix+plugin]; !ok {
			t.Fatalf("plugin %s has no inline config annotation: %v", plugin, pod.Annotations)
		}
		pod.Annotations[keys.ConfigAnnotationPrefix+plugin] = "kind: Plugin\nmetadata: {}\n"
		checkPodSaysWhy(t, pod, first, "kind should be ConfigManagementPlugin", "metadata.name should be non-empty")
	})
	t.Run("a server that never listens", func(t *testing.T) {
		pod := uninjected(dry, "failing-listen")
		sc := &pod.Spec.InitContainers[1]
		sc.Command, sc.Args = []string{"sleep", "3600"}, nil
		h := sc.Lifecycle.PostStart.Exec
		h.Command[slices.Index(h.Command, "--timeout")+1] = "3s"
		checkPodSaysWhy(t, pod, first, "plugin "+plugin+" did not start: not answering after 3s: no socket at "+keys.PluginSocketDir+"/")
	})
}

// checkPodSaysWhy creates pod and waits until the kubelet has failed the
// container named first at least once and its status says each of wants;
// no container after it may have run.
func checkPodSaysWhy(t *testing.T, pod *corev1.Pod, first string, wants ...string) {
	t.Helper()
	c := env.cp.Client()
	ns := pod.Namespace
	created, err := c.CreatePod(ns, pod, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, injected := created.Annotations[keys.StatusAnnotation]; injected {
		t.Fatalf("the webhook injected the hand-made pod again: %v", containerNamesOf(created.Spec.InitContainers))
	}
	t.Cleanup(func() { _ = c.Delete("/api/v1/namespaces/" + ns + "/pods/" + created.Name) })

	var failing corev1.ContainerStatus
	var p *corev1.Pod
	err = harness.Eventually(90*time.Second, 200*time.Millisecond, func() (bool, error) {
		p, err = c.GetPod(ns, created.Name)
		if err != nil {
			return false, err
		}
		for _, s := range p.Status.InitContainerStatuses {
			if s.Name == first {
				failing = s
			}
		}
		return failing.RestartCount > 0 && reasonOf(failing) != "", fmt.Errorf("%s: %s, restarts %d", first, harness.DescribeState(failing), failing.RestartCount)
	})
	if err != nil {
		t.Fatal(err)
	}
	why := reasonOf(failing)
	for _, w := range wants {
		if !strings.Contains(why, w) {
			t.Errorf("%s's status does not say %q: %q", first, w, why)
		}
	}
	for _, s := range harness.AllStatuses(p) {
		if s.Name != first && s.Name != keys.CopyInitContainer && (s.State.Running != nil || s.State.Terminated != nil || s.LastTerminationState.Terminated != nil) {
			t.Errorf("container %s ran although %s before it never answered: %s", s.Name, first, harness.DescribeState(s))
		}
	}
	events, err := c.Events(ns, "Pod", created.Name)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, e := range events {
		if e.Type == corev1.EventTypeWarning {
			seen = append(seen, e.Reason+": "+e.Message)
		}
	}
	t.Logf("the pod says why: container %s (restarts %d): %q; warning events: %q", first, failing.RestartCount, why, seen)
}

// withoutAPIToken drops the API token volume the apiserver added to the
// dry-run pod, and asks for none: the stand-in needs no token, and admission
// then adds nothing a second time.
func withoutAPIToken(pod *corev1.Pod) {
	no := false
	pod.Spec.AutomountServiceAccountToken = &no
	var vols []corev1.Volume
	for _, v := range pod.Spec.Volumes {
		if !strings.HasPrefix(v.Name, "kube-api-access-") {
			vols = append(vols, v)
		}
	}
	pod.Spec.Volumes = vols
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			var ms []corev1.VolumeMount
			for _, m := range list[i].VolumeMounts {
				if !strings.HasPrefix(m.Name, "kube-api-access-") {
					ms = append(ms, m)
				}
			}
			list[i].VolumeMounts = ms
		}
	}
}

// reasonOf is what a container's status says of its last failure: the
// termination message of its last run, else its waiting message.
func reasonOf(s corev1.ContainerStatus) string {
	var parts []string
	if t := s.LastTerminationState.Terminated; t != nil && t.Message != "" {
		parts = append(parts, t.Message)
	}
	if t := s.State.Terminated; t != nil && t.Message != "" {
		parts = append(parts, t.Message)
	}
	if w := s.State.Waiting; w != nil && w.Message != "" {
		parts = append(parts, w.Message)
	}
	return strings.Join(parts, " | ")
}

func containerNamesOf(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}
