package inject

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// injected is a pod the injector injected with helm, as stored.
func injected(t *testing.T) *corev1.Pod {
	t.Helper()
	r := Inject(pod(map[string]string{keys.PluginsAnnotation: "helm"}, nil), "argocd", testCat(t))
	if r.Decision != Injected {
		t.Fatal(r.Decision, r.Problems)
	}
	return r.Pod
}

func setImage(p *corev1.Pod, name, image string) {
	for _, list := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				list[i].Image = image
			}
		}
	}
}

func TestUpdateOfOwnedParts(t *testing.T) {
	cat := testCat(t)
	for _, tc := range []struct {
		name   string
		edit   func(*corev1.Pod)
		reason Reason
		msg    string
	}{
		{"label change", func(p *corev1.Pod) { p.Labels["team"] = "a" }, ReasonOwnedUnchanged, ""},
		{"repo-server image change", func(p *corev1.Pod) { setImage(p, "argocd-repo-server", "argocd:2") }, ReasonOwnedUnchanged, ""},
		{"sidecar image allowed", func(p *corev1.Pod) { setImage(p, "cmp-helm", "alpine/helm:3.17.0") }, ReasonOwnedUnchanged, ""},
		{"sidecar image not allowed", func(p *corev1.Pod) { setImage(p, "cmp-helm", "evil/anything:1") }, ReasonImageNotAllowed, `image "evil/anything:1" of container "cmp-helm" is not allowed`},
		{"copy image", func(p *corev1.Pod) { setImage(p, keys.CopyInitContainer, "evil/cp:1") }, ReasonImageNotAllowed, "must run the catalog's copy image"},
		{"config annotation edited", func(p *corev1.Pod) {
			p.Annotations[keys.ConfigAnnotationPrefix+"helm"] = "kind: ConfigManagementPlugin\nspec: {generate: {command: [sh, -c, evil]}}"
		}, ReasonNotCatalog, `differs from plugin "helm"'s config`},
		{"config annotation removed", func(p *corev1.Pod) { delete(p.Annotations, keys.ConfigAnnotationPrefix+"helm") }, ReasonNotCatalog, "must not be removed"},
		{"status removed", func(p *corev1.Pod) { delete(p.Annotations, keys.StatusAnnotation) }, ReasonNotCatalog, "must not be changed or removed"},
		{"reconciler mark forged", func(p *corev1.Pod) { p.Annotations[keys.ReconcilerAnnotation] = "other/release" }, ReasonNotCatalog,
			`annotation "cmp-injector.io/reconciled-by" is written by cmp-injector`},
		// The webhook's objectSelector is this label: switching it off would
		// end the review of every later update.
		{"inject label set to false", func(p *corev1.Pod) { p.Labels[keys.InjectLabel] = "false" }, ReasonNotCatalog, `label "cmp-injector.io/inject" of an injected pod must not be changed or removed`},
		{"inject label removed", func(p *corev1.Pod) { delete(p.Labels, keys.InjectLabel) }, ReasonNotCatalog, "must not be changed or removed"},
		// What the pod asked for is fixed once injected: an edit would only
		// make the pod stale, and rollout: auto restart its Deployment.
		{"plugins annotation changed", func(p *corev1.Pod) { p.Annotations[keys.PluginsAnnotation] = "helm,kustomize" }, ReasonNotCatalog,
			`annotation "cmp-injector.io/plugins" of an injected pod must not be changed or removed`},
		{"plugins annotation removed", func(p *corev1.Pod) { delete(p.Annotations, keys.PluginsAnnotation) }, ReasonNotCatalog,
			`annotation "cmp-injector.io/plugins" of an injected pod must not be changed`},
		{"image override added", func(p *corev1.Pod) { p.Annotations[keys.ImageAnnotationPrefix+"helm"] = "alpine/helm:3.17.0" }, ReasonNotCatalog,
			`annotation "image.cmp-injector.io/helm" of an injected pod must not be changed`},
		{"sidecar resized", func(p *corev1.Pod) {
			p.Spec.InitContainers[1].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("1Mi")
		}, ReasonNotCatalog, `the resources of container "cmp-helm" are the catalog's`},
		{"repo-server resized", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
		}, ReasonOwnedUnchanged, ""},
		{"debug container mounting the sockets", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "debugger", Image: "busybox", VolumeMounts: []corev1.VolumeMount{{Name: keys.PluginsVolume, MountPath: "/p"}}}})
		}, ReasonDebugAccess, `ephemeral container "debugger" must not mount volume "plugins"`},
		{"debug container mounting a plugin's tmp", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "debugger", Image: "busybox", VolumeMounts: []corev1.VolumeMount{{Name: "cmp-helm-tmp", MountPath: "/t"}}}})
		}, ReasonDebugAccess, `must not mount volume "cmp-helm-tmp"`},
		{"debug container targeting a sidecar", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{TargetContainerName: "cmp-helm",
				EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger", Image: "busybox"}})
		}, ReasonDebugAccess, `must not target container "cmp-helm"`},
		{"debug container of the repo-server", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{TargetContainerName: "argocd-repo-server",
				EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger", Image: "busybox"}})
		}, ReasonOwnedUnchanged, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := injected(t)
			updated := old.DeepCopy()
			tc.edit(updated)
			r := updatePod(old, updated, cat, false)
			if r.Reasons[0] != tc.reason || !strings.Contains(r.Message(), tc.msg) {
				t.Errorf("%s %v: %s", r.Decision, r.Reasons, r.Message())
			}
			if (tc.reason == ReasonOwnedUnchanged) != (r.Decision == Skipped) {
				t.Errorf("decision %s for reason %s", r.Decision, tc.reason)
			}
			// The injector's own service account may change anything.
			if r := updatePod(old, updated, cat, true); r.Decision != Skipped || r.Reasons[0] != ReasonTrustedUser {
				t.Errorf("trusted: %s %v", r.Decision, r.Reasons)
			}
		})
	}
	plain := pod(map[string]string{keys.PluginsAnnotation: "helm"}, nil)
	if r := updatePod(plain, plain.DeepCopy(), cat, false); r.Reasons[0] != ReasonNotInjected {
		t.Errorf("update of a pod nobody injected: %v", r.Reasons)
	}
}

// A pre-injected pod (cmp-injector inject, then edited) is checked on CREATE,
// not skipped because it carries a status annotation.
func TestCreateOfEditedPreInjectedPod(t *testing.T) {
	cat := testCat(t)
	if r := Inject(injected(t), "argocd", cat); r.Decision != Skipped || r.Reasons[0] != ReasonAlreadyInjected {
		t.Fatalf("untouched pre-injected pod: %s %v", r.Decision, r.Problems)
	}
	edited := injected(t)
	edited.Annotations[keys.ConfigAnnotationPrefix+"helm"] += "\n# edited"
	setImage(edited, "cmp-helm", "evil/anything:1")
	r := Inject(edited, "argocd", cat)
	if r.Decision != Denied || len(r.Problems) != 2 {
		t.Fatalf("edited pre-injected pod: %s %v", r.Decision, r.Problems)
	}
}

// The status is the pod's own word: on CREATE the containers the catalog
// would inject for the requested plugins are checked whatever it names.
func TestCreateWithForgedStatus(t *testing.T) {
	cat := testCat(t)
	for _, tc := range []struct {
		name string
		edit func(*corev1.Pod)
		msg  string
	}{
		{"status naming no container", func(p *corev1.Pod) {
			p.Annotations[keys.StatusAnnotation] = `{"plugins":["helm"],"containers":[],"initContainers":[],"volumes":[],"revision":"r1"}`
			setImage(p, "cmp-helm", "evil/anything:1")
			setImage(p, keys.CopyInitContainer, "evil/cp:1")
		}, `image "evil/anything:1" of container "cmp-helm" is not allowed`},
		{"status naming other plugins", func(p *corev1.Pod) {
			p.Annotations[keys.StatusAnnotation] = `{"plugins":[],"containers":[],"initContainers":[],"volumes":[],"revision":"r1"}`
		}, `names plugins "" but the pod asks for "helm"`},
		{"a requested sidecar missing", func(p *corev1.Pod) {
			p.Spec.InitContainers = p.Spec.InitContainers[:1]
		}, `not the container "cmp-helm" that cmp-injector would have added`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := injected(t)
			tc.edit(p)
			r := Inject(p, "argocd", cat)
			if r.Decision != Denied || !strings.Contains(r.Message(), tc.msg) {
				t.Fatalf("%s %v: %s, want a denial containing %q", r.Decision, r.Reasons, r.Message(), tc.msg)
			}
		})
	}
	p := injected(t)
	p.Annotations[keys.StatusAnnotation] = `{"plugins":["helm"],"containers":[],"initContainers":[],"volumes":[],"revision":"r1"}`
	setImage(p, keys.CopyInitContainer, "evil/cp:1")
	if r := Inject(p, "argocd", cat); !strings.Contains(r.Message(), "must run the catalog's copy image") {
		t.Errorf("copy image behind a forged status: %s %s", r.Decision, r.Message())
	}
}

func TestCheckConfigAnnotations(t *testing.T) {
	cat := testCat(t)
	if got := CheckConfigAnnotations(injected(t), cat); len(got) != 0 {
		t.Errorf("an injected pod's own config: %v", got)
	}
	edited := injected(t)
	edited.Annotations[keys.ConfigAnnotationPrefix+"helm"] = "kind: ConfigManagementPlugin\nspec: {generate: {command: [sh, -c, evil]}}"
	edited.Annotations[keys.ConfigAnnotationPrefix+"nosuch"] = "x"
	got := CheckConfigAnnotations(edited, cat)
	if len(got) != 2 || got[0].Reason != ReasonNotCatalog || !strings.Contains(got[0].Message, `differs from plugin "helm"'s config`) ||
		!strings.Contains(got[1].Message, `plugin "nosuch" has no inline config`) {
		t.Errorf("edited configs: %v", got)
	}
	// Not injected: the same check, whoever set the annotation.
	plain := pod(map[string]string{keys.PluginsAnnotation: "helm", keys.ConfigAnnotationPrefix + "helm": "evil"}, nil)
	if got := CheckConfigAnnotations(plain, cat); len(got) != 1 {
		t.Errorf("a config annotation on a pod not injected: %v", got)
	}
}
