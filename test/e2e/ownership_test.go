package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// TestInjectedPodsResistTheirAuthor replays the second attack run's
// reproductions as a user who may only create and patch pods (and debug and
// resize them): the webhook's review of an injected pod cannot be switched off
// by its own label, a forged status does not admit sidecars with any image,
// and kubectl debug and in-place resize cannot reach what the injector owns.
func TestInjectedPodsResistTheirAuthor(t *testing.T) {
	in := startInjector(t, catalogFor(t, true, map[string][]string{"*": {"helm"}}))
	ns := newNamespace(t, "own", enabledNS)
	waitActive(t, ns)
	editor := grantPodEditor(t, ns, "pods", "pods/ephemeralcontainers", "pods/resize")
	pod := loadPod(t, "repo-server-pod.yaml")
	createAs(t, editor, ns, pod)
	podPath := "/api/v1/namespaces/" + ns + "/pods/" + pod.Name
	stored, err := env.cp.Client().GetPod(ns, pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	inits, _ := containerNames(stored)
	helm := slices.Index(inits, "cmp-helm")
	if helm < 0 {
		t.Fatalf("no cmp-helm among the init containers %v", inits)
	}

	t.Run("the inject label cannot be switched off", func(t *testing.T) {
		// kubectl -n argocd label pod P cmp-injector.io/inject=false --overwrite
		err := editor.MergePatch(podPath, []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:"false"}}}`, keys.InjectLabel)))
		denied(t, "relabelling the pod", err, `label "cmp-injector.io/inject" of an injected pod must not be changed or removed`)
		err = editor.MergePatch(podPath, []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, keys.InjectLabel)))
		denied(t, "removing the label", err, "must not be changed or removed")
		// kubectl patch --type=json replace /spec/initContainers/<cmp-helm>/image:
		// the label still on, so the webhook still reviews it.
		err = editor.JSONPatch(podPath, []byte(fmt.Sprintf(`[{"op":"replace","path":"/spec/initContainers/%d/image","value":"evil/anything:1"}]`, helm)))
		denied(t, "the sidecar image", err, `image "evil/anything:1" of container "cmp-helm" is not allowed`)
		got, err := env.cp.Client().GetPod(ns, pod.Name)
		if err != nil {
			t.Fatal(err)
		}
		if got.Labels[keys.InjectLabel] != keys.EnabledValue || got.Spec.InitContainers[helm].Image == "evil/anything:1" {
			t.Fatalf("the pod changed: label %q, image %q", got.Labels[keys.InjectLabel], got.Spec.InitContainers[helm].Image)
		}
	})

	t.Run("a forged status does not admit any image", func(t *testing.T) {
		forged := preRendered(t, in, ns, "repo-server-pod.yaml")
		forged.Name = "forged"
		forged.Annotations[keys.StatusAnnotation] = `{"plugins":["helm"],"containers":[],"initContainers":[],"volumes":[],"revision":"x"}`
		for i := range forged.Spec.InitContainers {
			if forged.Spec.InitContainers[i].Name == "cmp-helm" {
				forged.Spec.InitContainers[i].Image = "evil/anything:1"
			}
		}
		_, err := editor.CreatePod(ns, forged, false)
		denied(t, "a pod whose status names no container", err, `image "evil/anything:1" of container "cmp-helm" is not allowed`)
	})

	t.Run("kubectl debug cannot mount the plugin volumes or target a sidecar", func(t *testing.T) {
		debugPath := podPath + "/ephemeralcontainers"
		err := editor.StrategicPatch(debugPath, []byte(`{"spec":{"ephemeralContainers":[{"name":"mounts","image":"busybox",
			"volumeMounts":[{"name":"plugins","mountPath":"/p"},{"name":"var-files","mountPath":"/v"}]}]}}`))
		denied(t, "a debug container mounting plugins and var-files", err, `ephemeral container "mounts" must not mount volume "plugins"`)
		err = editor.StrategicPatch(debugPath, []byte(`{"spec":{"ephemeralContainers":[{"name":"target","image":"busybox","targetContainerName":"cmp-helm"}]}}`))
		denied(t, "a debug container targeting cmp-helm", err, `must not target container "cmp-helm"`)
		// Debugging the repo-server itself stays the admin's RBAC decision.
		if err := editor.StrategicPatch(debugPath, []byte(`{"spec":{"ephemeralContainers":[{"name":"rs","image":"busybox","targetContainerName":"argocd-repo-server"}]}}`)); err != nil {
			t.Fatalf("a debug container of the repo-server: %v", err)
		}
	})

	t.Run("a sidecar cannot be resized", func(t *testing.T) {
		err := editor.StrategicPatch(podPath+"/resize", []byte(`{"spec":{"initContainers":[{"name":"cmp-helm","resources":{"requests":{"memory":"1Mi"}}}]}}`))
		var apiErr *harness.APIError
		if errors.As(err, &apiErr) && apiErr.Code == http.StatusNotFound {
			t.Skipf("kube-apiserver %s has no pods/resize subresource (1.33+)", env.k8sVer)
		}
		denied(t, "resizing cmp-helm", err, `the resources of container "cmp-helm" are the catalog's`)
	})
}
