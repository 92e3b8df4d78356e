package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// operatorCR is the ArgoCD resource the operator test applies; README's
// operator install-path block must equal it.
const operatorCR = "testdata/operator-argocd.yaml"

// readmeOperatorBlock is README's operator install-path block (the marker
// injector/readme_test.go reads too).
var readmeOperatorBlock = regexp.MustCompile("(?s)<!-- install-path: operator \\([^)]+\\) -->\\s*```yaml\\n(.*?)```")

// TestOperatorRepoServer runs argocd-operator's own manager (its module's
// release, hack/tools.sh argocd-operator) against the real apiserver and
// controllers, watching one enabled namespace, with the injector serving the
// webhook and reconciling with rollout: auto:
//
//   - the operator creates its repo-server Deployment from an ArgoCD resource;
//   - README's quick-start `kubectl patch` of that Deployment is reverted by
//     the operator's next reconcile;
//   - the opt-in on the ArgoCD resource (spec.repo.labels/annotations, as
//     README's operator block says) reaches the pod template, and the
//     ReplicaSet's pods are injected;
//   - a catalog change that needs new pods rolls the operator's Deployment
//     through kubectl.kubernetes.io/restartedAt, which the operator keeps
//     across its own reconciles: the new ReplicaSet's pods carry the new
//     catalog revision and the reconciler restarts once.
func TestOperatorRepoServer(t *testing.T) {
	cr := readOperatorCR(t)
	src, err := harness.OperatorSource()
	if err != nil {
		t.Fatal(err)
	}
	admin := env.cp.Client()
	if err := admin.InstallOperatorCRDs(src); err != nil {
		t.Fatal(err)
	}

	cat := map[string]any{}
	if err := yaml.Unmarshal(catalogFor(t, true, map[string][]string{"*": {"helm", "kustomize"}}), &cat); err != nil {
		t.Fatal(err)
	}
	cat["revision"] = "operator-1"
	leaseNS := newNamespace(t, "oplease", nil)
	ins := reconcilingInjectors(t, 1, leaseNS, mustYAML(t, cat), "--rollout=auto")
	ns := newNamespace(t, "operator", map[string]string{keys.NamespaceEnabledLabel: keys.EnabledValue, day2Label: "true"})
	waitActive(t, ns)

	started := time.Now()
	op, err := harness.StartOperator(env.cp.Kubeconfig, ns, filepath.Join(env.root, "operator"), env.logFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = op.Stop() })
	t.Logf("argocd-operator ready in %s", time.Since(started).Round(100*time.Millisecond))

	// The user's ArgoCD before opting in: the file's resource without the
	// opt-in. The operator's finalizer goes when it sees the deletion, so the
	// resource is deleted while the operator still runs.
	name := cr["metadata"].(map[string]any)["name"].(string)
	crPath := "/apis/argoproj.io/v1beta1/namespaces/" + ns + "/argocds"
	plain := deepCopyMap(t, cr)
	optIn := plain["spec"].(map[string]any)["repo"].(map[string]any)
	plain["spec"].(map[string]any)["repo"] = map[string]any{}
	plain["metadata"].(map[string]any)["namespace"] = ns
	if err := admin.Do(http.MethodPost, crPath, nil, plain, nil); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	t.Cleanup(func() {
		if err := admin.Delete(crPath + "/" + name); err != nil {
			t.Logf("delete ArgoCD %s: %v", name, err)
			return
		}
		_ = harness.Eventually(60*time.Second, 250*time.Millisecond, func() (bool, error) {
			var v map[string]any
			err := admin.Get(crPath+"/"+name, &v)
			var apiErr *harness.APIError
			return errors.As(err, &apiErr) && apiErr.Code == http.StatusNotFound, fmt.Errorf("ArgoCD %s still there: %w", name, err)
		})
	})

	depName := name + "-repo-server"
	depPath := harness.DeploymentPath(ns, depName)
	selector := "app.kubernetes.io/name=" + depName
	var dep appsv1.Deployment
	err = harness.Eventually(5*time.Minute, 250*time.Millisecond, func() (bool, error) {
		if done, werr := opExited(op); done {
			return false, werr
		}
		dep = appsv1.Deployment{}
		err := admin.Get(depPath, &dep)
		return err == nil, fmt.Errorf("no Deployment %s yet: %w", depName, err)
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, lastLines(op.Output(), 40))
	}
	t.Logf("ArgoCD created → the operator's Deployment %s: %s", depName, time.Since(created).Round(100*time.Millisecond))
	if _, err := admin.WaitRollout(ns, depName, selector, dep.Generation, 1, false, 3*time.Minute); err != nil {
		t.Fatalf("before the opt-in: %v", err)
	}
	before := dep.Spec.Template.ObjectMeta
	t.Run("README's kubectl patch is reverted by the operator", func(t *testing.T) {
		steps, err := harness.ReadReadme(env.repo)
		if err != nil {
			t.Fatal(err)
		}
		// kubectl patch --type merge, as README says; the answer is the
		// Deployment as patched.
		var patched appsv1.Deployment
		if err := admin.Do(http.MethodPatch, depPath, nil, json.RawMessage(steps.Patch), &patched); err != nil {
			t.Fatal(err)
		}
		if maps.Equal(patched.Spec.Template.Labels, before.Labels) && maps.Equal(patched.Spec.Template.Annotations, before.Annotations) {
			t.Fatalf("the patch changed nothing: template labels %v, annotations %v", patched.Spec.Template.Labels, patched.Spec.Template.Annotations)
		}
		// The operator watches the Deployments it owns: the patch starts a
		// reconcile, which puts the template back.
		var d appsv1.Deployment
		err = harness.Eventually(2*time.Minute, 100*time.Millisecond, func() (bool, error) {
			if done, werr := opExited(op); done {
				return false, werr
			}
			d = appsv1.Deployment{} // json.Unmarshal would merge into the old maps
			if err := admin.Get(depPath, &d); err != nil {
				return false, err
			}
			return d.Generation > patched.Generation && maps.Equal(d.Spec.Template.Labels, before.Labels) && maps.Equal(d.Spec.Template.Annotations, before.Annotations),
				fmt.Errorf("template labels %v, annotations %v (generation %d)", d.Spec.Template.Labels, d.Spec.Template.Annotations, d.Generation)
		})
		if err != nil {
			t.Fatalf("the operator did not revert the patch: %v; before it: labels %v, annotations %v", err, before.Labels, before.Annotations)
		}
		t.Logf("patch %s (generation %d) reverted by the operator (generation %d): template labels %v, annotations %v",
			steps.Patch, patched.Generation, d.Generation, d.Spec.Template.Labels, d.Spec.Template.Annotations)
	})

	// The opt-in where the operator keeps it: the ArgoCD resource.
	body, err := json.Marshal(map[string]any{"spec": map[string]any{"repo": optIn}})
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.MergePatch(crPath+"/"+name, body); err != nil {
		t.Fatal(err)
	}
	optedIn := time.Now()
	err = harness.Eventually(2*time.Minute, 200*time.Millisecond, func() (bool, error) {
		dep = appsv1.Deployment{}
		if err := admin.Get(depPath, &dep); err != nil {
			return false, err
		}
		return hasAll(dep.Spec.Template.Labels, optIn["labels"]) && hasAll(dep.Spec.Template.Annotations, optIn["annotations"]),
			fmt.Errorf("template labels %v, annotations %v", dep.Spec.Template.Labels, dep.Spec.Template.Annotations)
	})
	if err != nil {
		t.Fatal(err)
	}
	first, err := admin.WaitRollout(ns, depName, selector, dep.Generation, 1, true, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	pod := first.Pods[0]
	if st := status(t, &pod); st.Revision != "operator-1" || !reflect.DeepEqual(st.Plugins, []string{"helm"}) {
		t.Fatalf("pod %s: status %+v", pod.Name, st)
	}
	t.Logf("opt-in on the ArgoCD resource → pod %s of ReplicaSet %s injected: %s", pod.Name, first.ReplicaSet.Name, time.Since(optedIn).Round(100*time.Millisecond))

	t.Run("rollout auto restarts it through a field the operator keeps", func(t *testing.T) {
		cat["plugins"].(map[string]any)["helm"].(map[string]any)["image"] = "alpine/helm:3.17.0"
		cat["revision"] = "operator-2"
		edited := time.Now()
		setCatalog(t, ins, cat)
		var d appsv1.Deployment
		err := harness.Eventually(2*time.Minute, 100*time.Millisecond, func() (bool, error) {
			d = appsv1.Deployment{}
			if err := admin.Get(depPath, &d); err != nil {
				return false, err
			}
			return d.Annotations[keys.RolloutAnnotation] == "operator-2" && d.Spec.Template.Annotations[keys.RestartedAtAnnotation] != "",
				fmt.Errorf("annotation %s = %q, template annotations %v", keys.RolloutAnnotation, d.Annotations[keys.RolloutAnnotation], d.Spec.Template.Annotations)
		})
		if err != nil {
			t.Fatal(err)
		}
		restarted := time.Now()
		restartedAt := d.Spec.Template.Annotations[keys.RestartedAtAnnotation]
		restartGen := d.Generation
		t.Logf("catalog edit → restartedAt %s in the operator's Deployment (generation %d): %s", restartedAt, restartGen, restarted.Sub(edited).Round(100*time.Millisecond))

		operatorReconcile(t, op, ns, crPath+"/"+name)
		kept := func(when string) {
			t.Helper()
			d = appsv1.Deployment{}
			if err := admin.Get(depPath, &d); err != nil {
				t.Fatal(err)
			}
			if got := d.Spec.Template.Annotations[keys.RestartedAtAnnotation]; got != restartedAt || d.Generation != restartGen {
				t.Fatalf("%s: template restartedAt %q (generation %d); the restart wrote %q (generation %d)", when, got, d.Generation, restartedAt, restartGen)
			}
			if _, ok := d.Spec.Template.Annotations[keys.RolloutAnnotation]; ok {
				t.Errorf("%s: %s is in the pod template, which the operator strips", when, keys.RolloutAnnotation)
			}
		}
		kept("after the operator's reconcile")

		r, err := admin.WaitRollout(ns, depName, selector, restartGen, 1, true, 3*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if r.ReplicaSet.Name == first.ReplicaSet.Name {
			t.Fatalf("the Deployment is still on ReplicaSet %s", r.ReplicaSet.Name)
		}
		p := r.Pods[0]
		if st := status(t, &p); st.Revision != "operator-2" || len(st.Stale) != 0 {
			t.Fatalf("new pod %s: status %+v", p.Name, st)
		}
		t.Logf("restartedAt → pod %s of the new ReplicaSet %s injected at revision operator-2: %s", p.Name, r.ReplicaSet.Name, time.Since(restarted).Round(100*time.Millisecond))

		// Another reconcile, after the rollout's own writes. The first one
		// may have run before the operator's cache held the restart; by now
		// it does: with the restart under a cmp-injector.io/ key instead, the
		// operator strips it here (generation 6) and this check fails.
		operatorReconcile(t, op, ns, crPath+"/"+name)
		kept("after another reconcile")
		expectEvent(t, ns, "Deployment", depName, "PluginRollout", "operator-2")
		if n, _ := metricSum(t, ins, "cmp_injector_reconcile_rollouts_total"); n != 1 {
			t.Errorf("%v rollouts, want 1", n)
		}
	})
}

// operatorReconcile waits until the operator has run, from start to end, a
// reconcile of the ArgoCD resource at crPath that began after this call did:
// it reads how many reconciles have begun, touches the resource (an
// annotation, which the operator ignores but its watch does not, so one more
// reconcile is certain), and waits until that many plus one have returned
// (the operator reconciles one resource at a time). The count is read before
// the touch: the operator starts the touch's reconcile within milliseconds.
func operatorReconcile(t *testing.T, op *harness.Operator, ns, crPath string) {
	t.Helper()
	started, _, err := op.Reconciles(ns)
	if err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"e2e.cmp-injector.io/touched":%q}}}`, time.Now().UTC().Format(time.RFC3339Nano))
	if err := env.cp.Client().MergePatch(crPath, []byte(patch)); err != nil {
		t.Fatal(err)
	}
	err = harness.Eventually(2*time.Minute, 100*time.Millisecond, func() (bool, error) {
		if done, werr := opExited(op); done {
			return false, werr
		}
		_, finished, err := op.Reconciles(ns)
		return err == nil && finished >= started+1, fmt.Errorf("%v reconciles finished, waiting for the %vth (%w)", finished, started+1, err)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// readOperatorCR reads the ArgoCD resource the test applies and checks that
// README's operator install-path block is the same resource.
func readOperatorCR(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(operatorCR)
	if err != nil {
		t.Fatal(err)
	}
	var cr map[string]any
	if err := yaml.Unmarshal(b, &cr); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(env.repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := readmeOperatorBlock.FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no operator install-path block")
	}
	var block map[string]any
	if err := yaml.Unmarshal(m[1], &block); err != nil {
		t.Fatalf("README's operator block: %v", err)
	}
	if !reflect.DeepEqual(block, cr) {
		t.Fatalf("README's operator block differs from %s:\n%s", operatorCR, m[1])
	}
	return cr
}

// hasAll reports whether got carries every key of want (a decoded YAML map of
// strings) with the same value.
func hasAll(got map[string]string, want any) bool {
	w, _ := want.(map[string]any)
	for k, v := range w {
		if s, ok := v.(string); !ok || got[k] != s {
			return false
		}
	}
	return len(w) > 0
}

func deepCopyMap(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// opExited reports an operator that died, so a wait fails at once with its
// output instead of timing out.
func opExited(op *harness.Operator) (bool, error) {
	done, err := op.Exited()
	if done {
		return true, fmt.Errorf("argocd-operator exited: %w\n%s", err, lastLines(op.Output(), 40))
	}
	return false, nil
}
