package e2e

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
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
// containers the injector added, as local processes: the Helm sidecar runs
// the real cmp-server binary as its image's (the library's images carry it:
// serverPath, so there is no copy init container), starts from its projected
// plugin.yaml and listens on its socket, and a gRPC client streams a
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
			t.Logf("both plugin servers listen in %s", time.Since(start).Round(time.Millisecond))

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
			checkStartGates(t, stored, booted, native)
		})
	}
}

// checkStartGates runs each native sidecar's postStart hook (cmp-server probe
// --wait) in its booted container, as the kubelet does before it starts the
// next container: it returns at once while the plugin server serves and fails
// once the server is gone, saying why. Native sidecars have no startupProbe (its period
// is what the hook removed); classic sidecars gate nothing and have neither.
func checkStartGates(t *testing.T, pod *corev1.Pod, booted *harness.BootedPod, native bool) {
	t.Helper()
	procs := map[string]*harness.Process{}
	for _, p := range booted.Processes() {
		procs[p.Name] = p
	}
	all := append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	// The sockets container's gate first, while every plugin serves: it
	// returns once each plugin's socket is published and answers.
	var sockets *corev1.Container
	for i := range all {
		if all[i].Name == keys.SocketsContainer {
			sockets = &all[i]
		}
	}
	if sockets == nil {
		t.Fatalf("pod has no %s", keys.SocketsContainer)
	}
	if native != (sockets.Lifecycle != nil && sockets.Lifecycle.PostStart != nil) {
		t.Errorf("%s: native %v, postStart %+v", sockets.Name, native, sockets.Lifecycle)
	}
	if native {
		if out, err := booted.Exec(pod, sockets.Name, sockets.Lifecycle.PostStart.Exec.Command); err != nil {
			t.Errorf("%s: postStart fails while every plugin serves: %v\n%s", sockets.Name, err, out)
		}
	}
	gated := 0
	for _, c := range all {
		if !strings.HasPrefix(c.Name, keys.SidecarPrefix) || c.Name == keys.SocketsContainer {
			continue
		}
		restartable := c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		hook := c.Lifecycle != nil && c.Lifecycle.PostStart != nil && c.Lifecycle.PostStart.Exec != nil
		if c.StartupProbe != nil {
			t.Errorf("%s has a startupProbe: %+v", c.Name, c.StartupProbe)
		}
		switch {
		case !restartable && hook:
			t.Errorf("%s has a postStart gate but is not a native sidecar", c.Name)
			continue
		case !restartable:
			continue
		case !hook || procs[c.Name] == nil:
			t.Errorf("native sidecar %s: postStart exec hook %v, booted: %v", c.Name, hook, procs[c.Name] != nil)
			continue
		}
		argv := c.Lifecycle.PostStart.Exec.Command
		if !slices.Contains(argv, "--wait") {
			t.Errorf("%s: postStart %q does not wait for the server", c.Name, argv)
		}
		if out, err := booted.Exec(pod, c.Name, argv); err != nil {
			t.Errorf("%s: postStart %q fails while the plugin serves: %v\n%s", c.Name, argv, err, out)
		}
		// The server stops. (A crash leaves a stale socket instead; the probe's
		// reason for that is TestProbeServingThenStale's, on a killed server. Here,
		// under load, the hook twice exited 1 with no output after a SIGKILL,
		// which a loop of the same probe outside the boot never did.)
		reason := "is not listening"
		if err := procs[c.Name].Stop(10 * time.Second); err != nil {
			t.Errorf("%s: stop: %v", c.Name, err)
		}
		// The hook waits as long as a server may take to start; with the
		// server gone for good, a second of it says the same.
		out, err := booted.Exec(pod, c.Name, withFlag(argv, "--timeout", "1s"))
		if err == nil || !strings.Contains(out, reason) {
			t.Errorf("%s: postStart after the server went away: %v, want a failure saying %q:\n%s", c.Name, err, reason, out)
		} else {
			t.Logf("%s: as expected, the postStart gate returns while the server serves and, once it is gone (%s), reports: %s", c.Name, reason, strings.TrimSpace(out))
		}
		gated++
	}
	if want := map[bool]int{true: 2, false: 0}[native]; gated != want {
		t.Errorf("%d sidecars gated, want %d", gated, want)
	}
	// Every plugin server is gone now: the sockets container's gate says
	// which plugins it waits for.
	if native {
		out, err := booted.Exec(pod, sockets.Name, withFlag(sockets.Lifecycle.PostStart.Exec.Command, "--timeout", "1s"))
		if err == nil || !strings.Contains(out, "plugin helm: its server has no socket yet") {
			t.Errorf("%s: postStart with no plugin serving: %v, want a failure naming plugin helm:\n%s", sockets.Name, err, out)
		} else {
			t.Logf("%s: as expected, its gate returns while the plugins serve and, with none serving, reports: %s", sockets.Name, strings.TrimSpace(out))
		}
	}
}

// withFlag returns argv with flag's value set to value (appended when absent).
func withFlag(argv []string, flag, value string) []string {
	out := slices.Clone(argv)
	for i := range out {
		if out[i] == flag && i+1 < len(out) {
			out[i+1] = value
			return out
		}
	}
	return append(out, flag, value)
}
