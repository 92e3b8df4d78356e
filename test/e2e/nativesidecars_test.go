package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// TestNativeSidecarsAuto: the chart's default catalog.nativeSidecars: auto is
// settled by what the API server accepts, not by its version. helm install
// renders auto; the injector, booted from the Deployment helm stored with the
// service account's rights (the chart's Role, no reconciler), asks the API
// server by a dry run before it serves, and the pods it injects carry the
// kind the answer chose; doctor, asking the same way, agrees. On the suite's
// API server (v1.29+ unless the matrix turns the gate off) the answer is
// native sidecars; on a v1.32 kube-apiserver started with
// --feature-gates=SidecarContainers=false (the last kind of release where the
// gate can be turned off: it is locked on from v1.33), whose version the old
// semverCompare took for native, it is classic sidecars.
func TestNativeSidecarsAuto(t *testing.T) {
	t.Run("the suite's API server", func(t *testing.T) {
		checkNativeSidecarsAuto(t, env.cp, filepath.Join(env.root, "auto-suite"), nativeExpected(env.k8sVer, harness.APIServerArgs()))
	})
	t.Run("v1.32 with SidecarContainers=false", func(t *testing.T) {
		dir := filepath.Join(env.root, "auto-gate-off")
		t0 := time.Now()
		cp, err := harness.StartControlPlaneWith(filepath.Join(dir, "cp"), env.logFile, harness.ControlPlaneOptions{
			APIServer: "kube-apiserver-1.32", APIServerArgs: []string{"--feature-gates=SidecarContainers=false"}})
		if err != nil {
			t.Fatal(err)
		}
		defer cp.Stop()
		ver, err := cp.Version()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("a second control plane, kube-apiserver %s with SidecarContainers=false, ready in %s", ver, time.Since(t0).Round(time.Millisecond))
		checkNativeSidecarsAuto(t, cp, dir, false)
	})
}

// nativeExpected is whether kube-apiserver version, run with args, has native
// sidecars: the SidecarContainers gate's default (on from v1.29, alpha in
// v1.28, absent before), or what args set it to.
func nativeExpected(version string, args []string) bool {
	var minor int
	_, _ = fmt.Sscanf(version, "v1.%d", &minor)
	native := minor >= 29
	for _, a := range args {
		for _, g := range strings.Split(strings.TrimPrefix(a, "--feature-gates="), ",") {
			if v, ok := strings.CutPrefix(g, "SidecarContainers="); ok && strings.HasPrefix(a, "--feature-gates=") && minor >= 28 {
				native = v == "true"
			}
		}
	}
	return native
}

func checkNativeSidecarsAuto(t *testing.T, cp *harness.ControlPlane, dir string, native bool) {
	t.Helper()
	c := cp.Client()
	ns := "auto-" + strings.ToLower(strings.ReplaceAll(time.Now().Format("150405.000000"), ".", ""))
	if err := c.CreateNamespace(ns, enabledNS); err != nil {
		t.Fatal(err)
	}
	chart, err := cp.InstallChart(env.bins["cmp-injector"], dir, env.logFile,
		"--set", "reconciler.enabled=false", "--set-json", fmt.Sprintf(`catalog.namespaces={%q:["helm"]}`, ns))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = chart.Uninstall() }()
	var cm corev1.ConfigMap
	if err := c.Get("/api/v1/namespaces/"+harness.InjectorNamespace+"/configmaps/"+harness.Release+"-catalog", &cm); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cm.Data["catalog.yaml"], "nativeSidecars: auto") {
		t.Errorf("helm rendered no nativeSidecars: auto:\n%s", cm.Data["catalog.yaml"])
	}

	// The injector is ready, so it asked; its log says what it was told.
	out := chart.Injector.Output()
	asked := ""
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "asked the API server about native sidecars") {
			asked = line
		}
	}
	if !strings.Contains(asked, fmt.Sprintf(`"native":%v`, native)) || !strings.Contains(asked, `"namespace":"`+harness.InjectorNamespace+`"`) {
		t.Fatalf("the injector's log: %q, want native %v in namespace %s; whole log:\n%s", asked, native, harness.InjectorNamespace, out)
	}
	t.Logf("the injector: %s", asked)

	// The pods it injects carry that kind.
	if err := c.WaitServiceAccount(ns, harness.DefaultServiceAccount, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	pod := loadPod(t, "repo-server-pod.yaml")
	if err := c.WaitInjecting(ns, pod, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	got, err := c.CreatePod(ns, pod, false)
	if err != nil {
		t.Fatalf("the API server refused the pod the injector made: %v", err)
	}
	inits, mains := containerNames(got)
	if native {
		if !strings.Contains(strings.Join(inits, ","), "cmp-helm") || strings.Contains(strings.Join(mains, ","), "cmp-helm") {
			t.Errorf("native: init containers %v, containers %v", inits, mains)
		}
		for _, ic := range got.Spec.InitContainers {
			if ic.Name == "cmp-helm" && (ic.RestartPolicy == nil || *ic.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
				t.Errorf("stored cmp-helm has restartPolicy %v, want Always", ic.RestartPolicy)
			}
		}
	} else if strings.Join(mains, ",") != "argocd-repo-server,cmp-helm,"+keys.SocketsContainer || strings.Contains(strings.Join(inits, ","), "cmp-helm") {
		t.Errorf("classic: init containers %v, containers %v", inits, mains)
	}

	// doctor, as the cluster admin, makes the same dry run in the catalog's
	// namespace and agrees.
	cmd := exec.Command(env.bins["cmp-injector"], "doctor", "--kubeconfig", cp.Kubeconfig, "--namespace", harness.InjectorNamespace, "-o", "json")
	b, _ := cmd.Output() // other checks may fail here (no kubelet): only the one below counts
	var rep struct {
		Groups []struct {
			Checks []struct {
				ID, Message string
				OK          bool
			}
		}
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("doctor -o json: %v\n%s", err, b)
	}
	kind := map[bool]string{true: "native sidecars", false: "classic sidecars"}[native]
	found, judged := false, false
	for _, g := range rep.Groups {
		for _, r := range g.Checks {
			// The pod is judged against the catalog resolved as the
			// injector did: not stale for its sidecar kind.
			if r.ID == "pods.current" && strings.HasPrefix(r.Message, ns+"/"+got.Name+":") {
				judged = true
				if !r.OK {
					t.Errorf("doctor: %+v", r)
				}
			}
			if r.ID == "catalog.native-sidecars" {
				found = true
				if !r.OK || !strings.Contains(r.Message, "auto") || !strings.Contains(r.Message, kind) || !strings.Contains(r.Message, "namespace "+ns) {
					t.Errorf("doctor: %+v, want a pass saying auto resolves to %s (dry run in %s)", r, kind, ns)
				}
				t.Logf("doctor: %s", r.Message)
			}
		}
	}
	if !found || !judged {
		t.Errorf("doctor made no catalog.native-sidecars check or none of pods.current for %s:\n%s", got.Name, b)
	}
}
