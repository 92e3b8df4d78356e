package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/params"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// hostileMessage reaches helm through --set; it must arrive literally.
const hostileMessage = `it's "quoted", has commas, a=b, [brackets], $(whoami) and a.dot`

// TestInjectedPodBoots takes the pod the apiserver stored and runs the
// containers the injector added, as local processes: the copy init container
// copies the real cmp-server binary into var-files, the Helm sidecar starts from
// its projected plugin.yaml and listens on its socket, and a gRPC client streams a
// repository to it and generates manifests with parameters, as Argo CD does.
func TestInjectedPodBoots(t *testing.T) {
	for _, native := range []bool{true, false} {
		name := map[bool]string{true: "native sidecars", false: "classic sidecars"}[native]
		t.Run(name, func(t *testing.T) {
			startInjector(t, catalogFor(t, native, map[string][]string{"*": {"helm", "kustomize"}}))
			ns := newNamespace(t, "boot", enabledNS)
			waitActive(t, ns)
			pod := loadPod(t, "repo-server-pod.yaml")
			pod.Annotations[keys.PluginsAnnotation] = "helm, kustomize"
			stored := createStored(t, ns, pod)
			root := filepath.Join(env.root, map[bool]string{true: "n", false: "c"}[native])
			start := time.Now()
			booted, sockets, err := harness.BootInjectedPod(stored, env.bins["cmp-server"], root, env.logFile)
			if err != nil {
				t.Fatal(err)
			}
			defer booted.Stop()
			t.Logf("copy init container ran and both plugin servers listen in %s", time.Since(start).Round(time.Millisecond))

			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cl, err := client.Dial(ctx, filepath.Join(sockets, "helm.sock"))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			check, err := cl.Check(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !check.DiscoveryConfigured {
				t.Error("helm plugin reports no discovery; the example config discovers Chart.yaml")
			}
			msg := hostileMessage
			ps := []params.AppParameter{
				{Name: "values-files", Array: []string{"values-prod.yaml"}},
				{Name: "helm-parameters", Map: map[string]string{"message": msg, "service.port": "8081"}},
			}
			reqEnv, err := harness.GuestbookApp(kubeVersion(), ps).Environ()
			if err != nil {
				t.Fatal(err)
			}
			req := client.Request{RepoRoot: filepath.Join("testdata", "repo"), AppRelPath: "apps/guestbook", Env: reqEnv}
			match, err := cl.Match(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if !match.Supported {
				t.Error("helm plugin does not match a chart directory")
			}
			manifests, err := cl.Generate(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			all := strings.Join(manifests, "\n")
			t.Logf("generated %d manifests", len(manifests))
			for _, want := range []string{`"replicas":3`, `"name":"guestbook-guestbook"`, `"namespace":"demo"`, `"port":8081`} {
				if !strings.Contains(all, want) {
					t.Errorf("manifests lack %s:\n%s", want, all)
				}
			}
			if !strings.Contains(all, jsonString(msg)) {
				t.Errorf("the hostile value did not reach helm literally; want %s in:\n%s", jsonString(msg), all)
			}
			ann, err := cl.Parameters(ctx, client.Request{RepoRoot: filepath.Join("testdata", "repo"), AppRelPath: "apps/guestbook"})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, a := range ann {
				names = append(names, a.Name)
			}
			if got := strings.Join(names, ","); !strings.Contains(got, "values-files") || !strings.Contains(got, "helm-parameters") {
				t.Errorf("announcement names = %s", got)
			}
			checkStartupProbes(t, stored, booted, native)
		})
	}
}

// checkStartupProbes runs each native sidecar's startupProbe in its booted
// container, as the kubelet would: it passes while the plugin server serves and
// fails once the server is gone, whether it stopped cleanly (socket removed) or
// died (stale socket). Classic sidecars must have no probe at all.
func checkStartupProbes(t *testing.T, pod *corev1.Pod, booted *harness.BootedPod, native bool) {
	t.Helper()
	procs := map[string]*harness.Process{}
	for _, p := range booted.Processes() {
		procs[p.Name] = p
	}
	probed := 0
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		restartable := c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		if c.StartupProbe == nil {
			if restartable && strings.HasPrefix(c.Name, keys.SidecarPrefix) {
				t.Errorf("native sidecar %s has no startupProbe", c.Name)
			}
			continue
		}
		if !restartable {
			t.Errorf("%s has a startupProbe but is not a native sidecar", c.Name)
			continue
		}
		if c.StartupProbe.Exec == nil || procs[c.Name] == nil {
			t.Errorf("%s: startupProbe %+v, booted: %v", c.Name, c.StartupProbe, procs[c.Name] != nil)
			continue
		}
		argv := c.StartupProbe.Exec.Command
		if out, err := booted.Exec(pod, c.Name, argv); err != nil {
			t.Errorf("%s: startupProbe %q fails while the plugin serves: %v\n%s", c.Name, argv, err, out)
		}
		// Alternate a clean stop and a crash, so both ways a server goes away
		// are probed.
		reason := "is not listening"
		if probed%2 == 0 {
			if err := procs[c.Name].Stop(10 * time.Second); err != nil {
				t.Errorf("%s: stop: %v", c.Name, err)
			}
		} else {
			reason = "stale socket"
			_ = procs[c.Name].Signal(syscall.SIGKILL)
			_ = procs[c.Name].Wait(10 * time.Second)
		}
		out, err := booted.Exec(pod, c.Name, argv)
		if err == nil || !strings.Contains(out, reason) {
			t.Errorf("%s: startupProbe after the server went away: %v, want a failure saying %q:\n%s", c.Name, err, reason, out)
		} else {
			t.Logf("%s: as expected, the startupProbe passes while the server serves and, once it is gone (%s), reports: %s", c.Name, reason, strings.TrimSpace(out))
		}
		probed++
	}
	if want := map[bool]int{true: 2, false: 0}[native]; probed != want {
		t.Errorf("%d sidecars probed, want %d", probed, want)
	}
}
