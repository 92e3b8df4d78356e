package e2e

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// Issue 28 item 2 asks each plugin to add at most 150 ms to the repo-server's
// start. With the postStart gate every native sidecar still starts about a
// second after the one before it. These pod shapes tell whose second it is,
// in the same run as the injected pods:
//
//   - the injector's own pod with the gate removed: if its sidecars still
//     start a second apart, the step is the kubelet's, which starts the next
//     init container only in a later sync, on a fresh relist of the runtime
//     (the generic PLEG relists every second);
//   - the same plugins as regular containers ahead of the repo-server, each
//     keeping its gate: the kubelet starts all regular containers in one sync,
//     so this is what the plugins cost without the native sidecars' steps,
//     and the failing-plugin check below shows what that layout gives up.
//
// Both are built from the webhook's dry-run output for the bench's pod, made
// pods of their own without the opt-in label and annotation (uninjected), so
// the webhook passes them as they are and the reconciler ignores them.

// gateFreePod is the injected pod dry as a pod named name whose plugin
// sidecars have no postStart hook: nothing but the kubelet orders them.
func gateFreePod(dry *corev1.Pod, name string) *corev1.Pod {
	pod := uninjected(dry, name)
	for i := range pod.Spec.InitContainers {
		ic := &pod.Spec.InitContainers[i]
		if !strings.HasPrefix(ic.Name, keys.SidecarPrefix) || ic.Lifecycle == nil {
			continue
		}
		ic.Lifecycle.PostStart = nil
		if ic.Lifecycle.PreStop == nil && ic.Lifecycle.StopSignal == nil {
			ic.Lifecycle = nil
		}
	}
	return pod
}

// regularLayoutPod is the injected pod dry as a pod named name whose plugin
// sidecars are regular containers ahead of the repo-server, each with its
// postStart gate: the kubelet creates and starts regular containers one after
// another in a single sync, each start waiting for its own hook, and the copy
// init container still runs first.
func regularLayoutPod(dry *corev1.Pod, name string) *corev1.Pod {
	pod := uninjected(dry, name)
	var inits, plugins []corev1.Container
	for _, ic := range pod.Spec.InitContainers {
		if ic.RestartPolicy != nil && *ic.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			ic.RestartPolicy = nil
			plugins = append(plugins, ic)
			continue
		}
		inits = append(inits, ic)
	}
	pod.Spec.InitContainers = inits
	pod.Spec.Containers = append(plugins, pod.Spec.Containers...)
	return pod
}

// regularLayoutFailure runs the regular layout of dry with its first plugin's
// server never listening (the sidecar only sleeps; its gate's timeout is
// shortened to 3 s, as checkFailingPlugin does for the injector's layout) and
// reports what the kubelet does: whether the repo-server starts regardless,
// and what the pod's status says of the plugin. The injector's own layout
// holds the repo-server (TestRealNode's checkFailingPlugin proves it); this
// records the price of the one-pass layout, it asserts nothing about it.
func (b *nodeBench) regularLayoutFailure(dry *corev1.Pod) {
	b.t.Helper()
	c := env.cp.Client()
	pod := regularLayoutPod(dry, "bench-regular-failing")
	sc := &pod.Spec.Containers[0]
	if !strings.HasPrefix(sc.Name, keys.SidecarPrefix) || sc.Lifecycle == nil || sc.Lifecycle.PostStart == nil {
		b.t.Fatalf("the regular layout's first container is not a gated plugin sidecar: %s", sc.Name)
	}
	sc.Command, sc.Args = []string{"sleep", "3600"}, nil
	h := sc.Lifecycle.PostStart.Exec
	i := slices.Index(h.Command, "--timeout")
	if i < 0 || i+1 >= len(h.Command) {
		b.t.Fatalf("the gate of %s has no --timeout: %q", sc.Name, h.Command)
	}
	h.Command[i+1] = "3s"
	failing := sc.Name
	t0 := time.Now()
	if _, err := c.CreatePod(chainNS, pod, false); err != nil {
		b.t.Fatal(err)
	}
	var p *corev1.Pod
	var plugin corev1.ContainerStatus
	err := harness.Eventually(90*time.Second, 200*time.Millisecond, func() (bool, error) {
		var err error
		if p, err = c.GetPod(chainNS, pod.Name); err != nil {
			return false, err
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == failing {
				plugin = s
			}
		}
		return plugin.RestartCount > 0 && reasonOf(plugin) != "",
			fmt.Errorf("%s: %s, restarts %d", failing, harness.DescribeState(plugin), plugin.RestartCount)
	})
	if err != nil {
		b.t.Fatal(err)
	}
	seen := time.Since(t0)
	fmt.Printf("\n-- Regular layout, plugin %s never listening (gate timeout 3 s), %s after the create request:\n",
		strings.TrimPrefix(failing, keys.SidecarPrefix), seen.Round(100*time.Millisecond))
	starts, serr := b.node.ProcessStarts(p)
	for _, s := range p.Status.ContainerStatuses {
		state := harness.DescribeState(s)
		if at, ok := starts[s.Name]; ok && serr == nil {
			state += fmt.Sprintf(", first process at %s ms", msText(ms(at.Sub(t0))))
		}
		fmt.Printf("   %-22s restarts %d, %s\n", s.Name, s.RestartCount, state)
	}
	fmt.Printf("   %s says: %q\n", failing, reasonOf(plugin))
	events, err := c.Events(chainNS, "Pod", pod.Name)
	if err != nil {
		b.t.Fatal(err)
	}
	for _, e := range events {
		if e.Type == corev1.EventTypeWarning {
			fmt.Printf("   event %s: %s\n", e.Reason, e.Message)
		}
	}
	b.remove(p)
}

// printRelists prints the kubelet's relists over a part of the bench.
func printRelists(r harness.PLEGRelists) {
	if r.Count < 1 {
		fmt.Println("   kubelet PLEG: no relist in the part")
		return
	}
	fmt.Printf("   kubelet PLEG over the part (its /metrics): %.0f relists, a relist started every %s ms on average,\n"+
		"   each took %s ms (the generic PLEG relists a second after the last one ended)\n", r.Count,
		msText(ms(r.Interval)/r.Count), msText(ms(r.Duration)/r.Count))
}
