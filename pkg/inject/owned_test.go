package inject

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

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
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := injected(t)
			updated := old.DeepCopy()
			tc.edit(updated)
			r := Update(old, updated, cat, false)
			if r.Reasons[0] != tc.reason || !strings.Contains(r.Message(), tc.msg) {
				t.Errorf("%s %v: %s", r.Decision, r.Reasons, r.Message())
			}
			if (tc.reason == ReasonOwnedUnchanged) != (r.Decision == Skipped) {
				t.Errorf("decision %s for reason %s", r.Decision, tc.reason)
			}
			// The injector's own service account may change anything.
			if r := Update(old, updated, cat, true); r.Decision != Skipped || r.Reasons[0] != ReasonTrustedUser {
				t.Errorf("trusted: %s %v", r.Decision, r.Reasons)
			}
		})
	}
	plain := pod(map[string]string{keys.PluginsAnnotation: "helm"}, nil)
	if r := Update(plain, plain.DeepCopy(), cat, false); r.Reasons[0] != ReasonNotInjected {
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
