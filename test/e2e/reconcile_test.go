package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// day2Label marks this test's namespaces: the suite's other injectors (the
// chain's) leave pods in enabled namespaces, which these replicas must not
// look after, as two releases splitting a cluster would not.
const day2Label = "e2e.cmp-injector.io/day2"

var day2Selector = keys.NamespaceEnabledLabel + "=" + keys.EnabledValue + "," + day2Label + "=true"

// reconcilingInjectors starts n `cmp-injector serve --reconcile` replicas
// electing their leader in leaseNS, each watching its own copy of catalog; the
// first serves the webhook. The admin plays the injector's service account.
func reconcilingInjectors(t *testing.T, n int, leaseNS string, catalog []byte, extra ...string) []*harness.Injector {
	t.Helper()
	var out []*harness.Injector
	for i := range n {
		in, err := harness.NewInjector(env.bins["cmp-injector"], filepath.Join(t.TempDir(), fmt.Sprint(i)), catalog, env.logFile)
		if err != nil {
			t.Fatal(err)
		}
		in.ExtraArgs = append([]string{"--trusted-user=admin", "--reconcile", "--kubeconfig=" + env.cp.Kubeconfig,
			"--leader-election-namespace=" + leaseNS, "--namespace-selector=" + day2Selector, "--leader-election-identity=replica-" + fmt.Sprint(i),
			// Short terms keep a takeover inside the test's budget.
			"--leader-election-lease-duration=4s", "--leader-election-renew-deadline=3s", "--leader-election-retry-period=250ms"}, extra...)
		if err := in.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = in.Stop() })
		out = append(out, in)
	}
	installWebhook(t, out[0])
	return out
}

// setCatalog writes the catalog every replica watches.
func setCatalog(t *testing.T, ins []*harness.Injector, cat map[string]any) {
	t.Helper()
	b, err := yaml.Marshal(cat)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		if err := in.SetCatalog(b); err != nil {
			t.Fatal(err)
		}
	}
}

// metricSum adds a metric over every replica.
func metricSum(t *testing.T, ins []*harness.Injector, name string, labels ...string) (total float64, each []float64) {
	t.Helper()
	for _, in := range ins {
		m, err := in.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		v := harness.Sum(m, name, labels...)
		each = append(each, v)
		total += v
	}
	return total, each
}

// repoServerDeployment creates a Deployment of the repo-server pod fixture
// and returns its one injected pod as stored, once the controllers made it.
func repoServerDeployment(t *testing.T, ns string) (*appsv1.Deployment, *corev1.Pod) {
	t.Helper()
	pod := loadPod(t, "repo-server-pod.yaml")
	pod.Labels["app"] = "repo-server"
	one := int32(1)
	dep := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "argocd-repo-server"},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "repo-server"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels, Annotations: pod.Annotations}, Spec: pod.Spec}},
	}
	c := env.cp.Client()
	if err := c.Do(http.MethodPost, "/apis/apps/v1/namespaces/"+ns+"/deployments", nil, dep, dep); err != nil {
		t.Fatal(err)
	}
	var stored *corev1.Pod
	err := harness.Eventually(60*time.Second, 100*time.Millisecond, func() (bool, error) {
		pods, err := c.ListPods(ns, "app=repo-server")
		if err != nil || len(pods) != 1 {
			return false, fmt.Errorf("%d pods: %w", len(pods), err)
		}
		stored = &pods[0]
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := stored.Annotations[keys.StatusAnnotation]; !ok {
		t.Fatalf("the Deployment's pod was not injected: %v", stored.Annotations)
	}
	return dep, stored
}

// TestCatalogChangesReachRunningPods is the day-2 story on the real control
// plane: a Deployment's repo-server pod is injected and its sidecar booted;
// the admin changes the helm plugin's config in the catalog; the reconciler
// (only the leader of two replicas) writes it into the pod's annotation; the
// harness projects it as the kubelet does; the running sidecar serves the new
// config with no restart. A bad projected file keeps the old config serving.
// Then the plugin's image changes: the pod is stale, by metric, Events on the
// pod and its Deployment, and its status annotation.
func TestCatalogChangesReachRunningPods(t *testing.T) {
	leaseNS := newNamespace(t, "lease", nil)
	cat := map[string]any{}
	if err := yaml.Unmarshal(catalogFor(t, true, map[string][]string{"*": {"helm"}}), &cat); err != nil {
		t.Fatal(err)
	}
	ins := reconcilingInjectors(t, 2, leaseNS, mustYAML(t, cat))
	ns := newNamespace(t, "day2", map[string]string{keys.NamespaceEnabledLabel: keys.EnabledValue, day2Label: "true"})
	waitActive(t, ns)
	c := env.cp.Client()
	dep, stored := repoServerDeployment(t, ns)

	booted, sockets, err := harness.BootInjectedPod(stored, env.bins["cmp-server"], filepath.Join(env.root, "d2"), env.logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer booted.Stop()
	sidecar := booted.Processes()[0]
	generate := func() (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cl, err := client.Dial(ctx, filepath.Join(sockets, "helm.sock"))
		if err != nil {
			return "", err
		}
		defer cl.Close()
		reqEnv, err := harness.GuestbookApp(kubeVersion(), nil).Environ()
		if err != nil {
			return "", err
		}
		out, err := cl.Generate(ctx, client.Request{RepoRoot: filepath.Join("testdata", "repo"), AppRelPath: "apps/guestbook", Env: reqEnv})
		return strings.Join(out, "\n"), err
	}
	before, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(before, "hello from values.yaml") {
		t.Fatalf("first output lacks the chart's message:\n%s", before)
	}

	// The admin adds an init step to the helm plugin: a config-only change.
	const newMessage = "hello from the new plugin config"
	helm := cat["plugins"].(map[string]any)["helm"].(map[string]any)
	catalogImage := helm["image"]
	spec := helm["config"].(map[string]any)["inline"].(map[string]any)["spec"].(map[string]any)
	spec["init"] = map[string]any{"command": []string{"sed", "-i", "s/hello from values.yaml/" + newMessage + "/", "values.yaml"}}
	cat["revision"] = "day2-config"
	edited := time.Now()
	setCatalog(t, ins, cat)
	var updated *corev1.Pod
	err = harness.Eventually(30*time.Second, 20*time.Millisecond, func() (bool, error) {
		p, err := c.GetPod(ns, stored.Name)
		if err != nil {
			return false, err
		}
		updated = p
		return strings.Contains(p.Annotations[keys.ConfigAnnotationPrefix+"helm"], "sed"), fmt.Errorf("annotation not updated")
	})
	if err != nil {
		t.Fatal(err)
	}
	annotated := time.Now()
	if err := booted.Update(updated); err != nil {
		t.Fatal(err)
	}
	projected := time.Now()
	var after string
	err = harness.Eventually(30*time.Second, 10*time.Millisecond, func() (bool, error) {
		out, err := generate()
		after = out
		return err == nil && strings.Contains(out, newMessage), fmt.Errorf("old output (err %w)", err)
	})
	if err != nil {
		t.Fatalf("the sidecar never served the new config: %v\n%s", err, lastLines(sidecar.Output(), 30))
	}
	served := time.Now()
	t.Logf("catalog edit → pod annotation updated: %s; annotation projected → first request served by the new config: %s",
		annotated.Sub(edited).Round(time.Millisecond), served.Sub(projected).Round(time.Millisecond))
	if strings.Contains(after, "hello from values.yaml") {
		t.Errorf("new output still has the old message:\n%s", after)
	}
	if done, _ := sidecar.Exited(); done {
		t.Error("the sidecar process exited; it was to reload without a restart")
	}
	if !strings.Contains(sidecar.Output(), "plugin configuration reloaded") {
		t.Error("the sidecar did not log its reload")
	}
	if st := status(t, updated); st.Revision != "day2-config" || len(st.Stale) != 0 {
		t.Errorf("status after a live change: %+v", st)
	}
	var depNow appsv1.Deployment
	if err := c.Get("/apis/apps/v1/namespaces/"+ns+"/deployments/"+dep.Name, &depNow); err != nil {
		t.Fatal(err)
	}
	if depNow.Generation != 1 {
		t.Errorf("the Deployment changed (generation %d): a GitOps tool would see drift", depNow.Generation)
	}
	leaders, each := metricSum(t, ins, "cmp_injector_reconcile_leader")
	patches, patchesEach := metricSum(t, ins, "cmp_injector_reconcile_patches_total", "result=success")
	if leaders != 1 || patches < 1 {
		t.Fatalf("leaders %v, patches %v", each, patchesEach)
	}
	for i := range ins {
		if each[i] == 0 && patchesEach[i] != 0 {
			t.Errorf("replica %d patched %v times without leading", i, patchesEach[i])
		}
	}
	t.Logf("leader per replica %v, patches per replica %v", each, patchesEach)
	expectEvent(t, ns, "Pod", stored.Name, "PluginConfigUpdated", "day2-config")
	if pr, _, _ := doctorPod(t, ins[0], leaseNS, stored.Name); !pr.OK || !strings.Contains(pr.Message, "current with catalog revision day2-config") {
		t.Errorf("doctor on the current pod: %+v", pr)
	}

	t.Run("a bad projected config keeps the old one serving", func(t *testing.T) {
		bad := updated.DeepCopy()
		bad.Annotations[keys.ConfigAnnotationPrefix+"helm"] = "kind: ConfigManagementPlugin\nmetadata: {name: helm}\nspec: {generate: {command: []}}\n"
		if err := booted.Update(bad); err != nil {
			t.Fatal(err)
		}
		err := harness.Eventually(10*time.Second, 20*time.Millisecond, func() (bool, error) {
			return strings.Contains(sidecar.Output(), "still serving the previous one"), fmt.Errorf("no rejection logged")
		})
		if err != nil {
			t.Fatal(err)
		}
		out, err := generate()
		if err != nil || !strings.Contains(out, newMessage) {
			t.Errorf("after a bad config: %v\n%s", err, out)
		}
		if err := booted.Update(updated); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("an image change makes the pod stale", func(t *testing.T) {
		helm["image"] = "alpine/helm:3.17.0"
		cat["revision"] = "day2-image"
		setCatalog(t, ins, cat)
		err := harness.Eventually(30*time.Second, 50*time.Millisecond, func() (bool, error) {
			v, _ := metricSum(t, ins, "cmp_injector_stale_pods", "plugin=helm", "reason=image")
			return v == 1, fmt.Errorf("cmp_injector_stale_pods{plugin=helm,reason=image} = %v", v)
		})
		if err != nil {
			t.Fatal(err)
		}
		expectEvent(t, ns, "Pod", stored.Name, "StalePlugins", "alpine/helm:3.17.0")
		expectEvent(t, ns, "Deployment", dep.Name, "StalePlugins", "alpine/helm:3.17.0")
		var p *corev1.Pod
		err = harness.Eventually(10*time.Second, 50*time.Millisecond, func() (bool, error) {
			p, err = c.GetPod(ns, stored.Name)
			return err == nil && len(status(t, p).Stale) > 0, fmt.Errorf("status not stale: %w", err)
		})
		if err != nil {
			t.Fatal(err)
		}
		st := status(t, p)
		if st.Revision != "day2-config" || st.Stale[0].Reason != inject.StaleImage {
			t.Errorf("status of a stale pod: %s", p.Annotations[keys.StatusAnnotation])
		}
		if got := p.Spec.InitContainers; len(got) == 0 || p.Annotations[keys.ConfigAnnotationPrefix+"helm"] != updated.Annotations[keys.ConfigAnnotationPrefix+"helm"] {
			t.Error("the stale pod's config was changed")
		}
		t.Logf("stale status: %s", p.Annotations[keys.StatusAnnotation])
		pr, text, code := doctorPod(t, ins[0], leaseNS, stored.Name)
		if code != 1 || pr.OK || pr.Pod == nil || len(pr.Pod.Stale) == 0 || pr.Pod.Stale[0].Reason != inject.StaleImage ||
			!strings.Contains(pr.Hint, "rollout restart deployment/"+dep.Name) {
			t.Errorf("doctor on the stale pod: exit %d, %+v\n%s", code, pr, text)
		}
		// The webhook's URL answers with a certificate its caBundle verifies.
		for _, want := range []string{"✘ " + ns + "/" + stored.Name + ": stale", "hint: restart it", "the caBundle verifies the certificate served at 127.0.0.1"} {
			if !strings.Contains(text, want) {
				t.Errorf("doctor's text lacks %q:\n%s", want, text)
			}
		}
		t.Logf("doctor says:\n%s", lastLines(text, 60))
	})

	// The webhook configuration lives as long as the whole test: a subtest's
	// cleanup deleting it left the next subtest's first pods unreviewed
	// (created before the apiserver saw the configuration again).
	whole := t
	t.Run("the follower takes over when the leader dies", func(t *testing.T) {
		_, each := metricSum(t, ins, "cmp_injector_reconcile_leader")
		leader := slices.Index(each, 1)
		if leader < 0 {
			t.Fatalf("no leader: %v", each)
		}
		follower := ins[1-leader]
		if err := ins[leader].Kill(); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		// On a cluster the webhook Service routes to the replica left; here
		// the webhook configuration is pointed at it. Without a webhook to
		// review them (failurePolicy Fail), its patches would be refused.
		installWebhook(whole, follower)
		// The image goes back: the pod is current again once someone acts.
		helm["image"] = catalogImage
		cat["revision"] = "day2-failover"
		setCatalog(t, []*harness.Injector{follower}, cat)
		err := harness.Eventually(30*time.Second, 50*time.Millisecond, func() (bool, error) {
			p, err := c.GetPod(ns, stored.Name)
			if err != nil {
				return false, err
			}
			st := status(t, p)
			return st.Revision == "day2-failover" && len(st.Stale) == 0, fmt.Errorf("status %+v", st)
		})
		if err != nil {
			t.Fatal(err)
		}
		m, err := follower.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		if m.Sum("cmp_injector_reconcile_leader") != 1 || m.Sum("cmp_injector_stale_pods") != 0 {
			t.Errorf("the follower: leader %v, stale pods %v", m.Sum("cmp_injector_reconcile_leader"), m.Sum("cmp_injector_stale_pods"))
		}
		t.Logf("leader killed; the follower brought the pod current %s later (Lease duration 4s)", time.Since(killed).Round(100*time.Millisecond))
	})

	t.Run("rollout auto restarts the Deployment", func(t *testing.T) {
		for _, in := range ins {
			if err := in.Stop(); err != nil {
				t.Fatal(err)
			}
		}
		helm["image"] = "alpine/helm:3.17.0"
		cat["revision"] = "day2-image"
		auto := reconcilingInjectors(t, 1, leaseNS, mustYAML(t, cat), "--rollout=auto")
		var d appsv1.Deployment
		err := harness.Eventually(30*time.Second, 50*time.Millisecond, func() (bool, error) {
			if err := c.Get("/apis/apps/v1/namespaces/"+ns+"/deployments/"+dep.Name, &d); err != nil {
				return false, err
			}
			got := d.Annotations[keys.RolloutAnnotation]
			return got == "day2-image" && d.Spec.Template.Annotations[keys.RestartedAtAnnotation] != "",
				fmt.Errorf("annotation %s = %q, template %v", keys.RolloutAnnotation, got, d.Spec.Template.Annotations)
		})
		if err != nil {
			t.Fatal(err)
		}
		// argocd-operator owns its repo-server Deployment and, on its next
		// reconcile, keeps only *kubernetes.io*, *k8s.io* and *openshift.io*
		// annotations: the restart (kubectl's restartedAt) survives, and the
		// reconciler does not restart again for the same revision.
		if _, ok := d.Spec.Template.Annotations[keys.RolloutAnnotation]; ok {
			t.Errorf("the restart is %s in the pod template, which the operator strips", keys.RolloutAnnotation)
		}
		depPath := "/apis/apps/v1/namespaces/" + ns + "/deployments/" + dep.Name
		err = harness.Eventually(30*time.Second, 100*time.Millisecond, func() (bool, error) {
			// The Deployment controller writes it too: read, strip, write
			// until no one wrote in between.
			if err := c.Get(depPath, &d); err != nil {
				return false, err
			}
			delete(d.Annotations, keys.RolloutAnnotation)
			err := c.Do(http.MethodPut, depPath, nil, &d, nil)
			var apiErr *harness.APIError
			if errors.As(err, &apiErr) && apiErr.Code == http.StatusConflict {
				return false, err
			}
			return true, err
		})
		if err != nil {
			t.Fatalf("the operator's update: %v", err)
		}
		expectEvent(t, ns, "Deployment", dep.Name, "PluginRollout", "day2-image")
		// The Deployment's new pod is injected with the catalog as it is now.
		err = harness.Eventually(60*time.Second, 100*time.Millisecond, func() (bool, error) {
			pods, err := c.ListPods(ns, "app=repo-server")
			if err != nil {
				return false, err
			}
			for i := range pods {
				if pods[i].Name != stored.Name {
					st := status(t, &pods[i])
					return st.Revision == "day2-image" && len(st.Stale) == 0, fmt.Errorf("new pod status %+v", st)
				}
			}
			return false, fmt.Errorf("no new pod yet (%d pods)", len(pods))
		})
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := metricSum(t, auto, "cmp_injector_reconcile_rollouts_total"); n != 1 {
			t.Errorf("%v rollouts, want 1", n)
		}
	})
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func mustYAML(t *testing.T, v any) []byte {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// expectEvent waits for an Event of reason about the object whose message
// contains want.
func expectEvent(t *testing.T, ns, kind, name, reason, want string) {
	t.Helper()
	var seen []string
	err := harness.Eventually(20*time.Second, 100*time.Millisecond, func() (bool, error) {
		evs, err := env.cp.Client().Events(ns, kind, name)
		if err != nil {
			return false, err
		}
		seen = seen[:0]
		for _, e := range evs {
			seen = append(seen, e.Reason+": "+e.Message)
			if e.Reason == reason && strings.Contains(e.Message, want) {
				t.Logf("%s %s event: %s", kind, reason, e.Message)
				return true, nil
			}
		}
		return false, fmt.Errorf("no %s event on %s %s containing %q", reason, kind, name, want)
	})
	if err != nil {
		b, _ := json.MarshalIndent(seen, "", "  ")
		t.Fatalf("%v; events: %s", err, b)
	}
}

// doctorCheck is one check of `cmp-injector doctor -o json`.
type doctorCheck struct {
	OK      bool   `json:"ok"`
	Message string `json:"message"`
	Hint    string `json:"hint"`
	Pod     *struct {
		Name  string              `json:"name"`
		Stale []inject.Difference `json:"stale"`
	} `json:"pod"`
}

// doctorPod runs doctor (JSON, then text) against the cluster as the admin,
// with in's catalog file, and returns the check of the named pod, the text
// output and the exit code.
func doctorPod(t *testing.T, in *harness.Injector, installNS, pod string) (doctorCheck, string, int) {
	t.Helper()
	run := func(args ...string) (string, int) {
		cmd := exec.Command(env.bins["cmp-injector"], append([]string{"doctor", "--kubeconfig", env.cp.Kubeconfig,
			"--namespace", installNS, "--catalog", in.Catalog}, args...)...)
		code, stdout, stderr := servingtest.Run(t, cmd)
		return stdout + stderr, code
	}
	js, code := run("-o", "json")
	var rep struct {
		OK     bool `json:"ok"`
		Groups []struct {
			Name   string        `json:"name"`
			Checks []doctorCheck `json:"checks"`
		} `json:"groups"`
	}
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatalf("doctor -o json: %v\n%s", err, js)
	}
	if rep.OK != (code == 0) {
		t.Errorf("doctor: ok %v but exit %d", rep.OK, code)
	}
	text, textCode := run()
	if textCode != code {
		t.Errorf("doctor exits %d with text, %d with json", textCode, code)
	}
	for _, g := range rep.Groups {
		for _, c := range g.Checks {
			if c.Pod != nil && c.Pod.Name == pod {
				return c, text, code
			}
		}
	}
	t.Fatalf("doctor has no check of pod %s:\n%s", pod, text)
	return doctorCheck{}, "", 0
}
