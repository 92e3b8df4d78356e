package inject

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// What the injector owns in a pod (its status annotation, the config
// annotations projected into the sidecars, the images of its containers) stays
// what the catalog says: an attack run changed a running pod's cmp-helm image
// and its plugin.yaml annotation with nothing but pod patch rights, and a pod
// pre-rendered by `cmp-injector inject` then edited was admitted as it was.

// verifyOwned checks a pod created with a status annotation (pre-rendered by
// `cmp-injector inject`, or forged) against the catalog: each config
// annotation equals its plugin's config, and every container the catalog
// would inject for the plugins the pod asks for is there and runs the
// catalog's image (or one its allowedImages allow), the copy container the
// catalog's copy image. Whether the copy container is wanted is the catalog's
// decision for those plugins (serverChoice), never the pod's; one the pod
// carries all the same is checked like the others. The status is the pod's
// own word, so it only adds containers to check, never removes one: a status
// naming no container must not admit sidecars with any image.
func verifyOwned(pod *corev1.Pod, cat *catalog.Catalog) []Problem {
	st, problems := ownedStatus(pod)
	if st == nil {
		return problems
	}
	problems = append(problems, CheckConfigAnnotations(pod, cat)...)
	requested, parseProblems := parsePlugins(pod.Annotations[keys.PluginsAnnotation])
	problems = append(problems, parseProblems...)
	if !slices.Equal(requested, st.Plugins) {
		problems = append(problems, Problem{ReasonNotCatalog, fmt.Sprintf(
			"annotation %q names plugins %s but the pod asks for %s in %q; only cmp-injector writes it (re-render pre-injected pods with cmp-injector inject)",
			keys.StatusAnnotation, quoteBounded(strings.Join(st.Plugins, ", ")), quoteBounded(strings.Join(requested, ", ")), keys.PluginsAnnotation)})
	}
	// The copy container is wanted only when the catalog copies for these
	// plugins, and its image checked whenever the pod carries one.
	var want []string
	if serverChoice(catalogEntries(cat, requested)).Copies() {
		want = append(want, keys.CopyInitContainer)
	}
	want = append(want, keys.SocketsContainer)
	for _, p := range requested {
		want = append(want, keys.SidecarName(p))
	}
	present := map[string]bool{}
	for _, c := range ownedContainers(pod, st, append(want, keys.CopyInitContainer)) {
		present[c.Name] = true
		problems = append(problems, checkImage(c, cat)...)
	}
	for _, n := range want {
		if !present[n] {
			problems = append(problems, Problem{ReasonNotCatalog, fmt.Sprintf(
				"the pod carries %q but not the container %q that cmp-injector would have added (re-render pre-injected pods with cmp-injector inject)",
				keys.StatusAnnotation, n)})
		}
	}
	return problems
}

// updatePod decides an UPDATE of a pod: changes to what the injector owns must
// keep it as the catalog allows; everything else is the pod owner's business.
// trusted is true for the injector's own service account.
func updatePod(oldPod, newPod *corev1.Pod, cat *catalog.Catalog, trusted bool) *Report {
	_, oldOwned := oldPod.Annotations[keys.StatusAnnotation]
	_, newOwned := newPod.Annotations[keys.StatusAnnotation]
	if !oldOwned && !newOwned {
		// Pod volumes are immutable: a pod injected by no one has no
		// sidecar or projection that an annotation could reach.
		return skipped(ReasonNotInjected)
	}
	if trusted {
		return skipped(ReasonTrustedUser)
	}
	var problems []Problem
	// The webhook is called for a pod by this label (its objectSelector): a
	// pod author who could drop it would switch the review of every later
	// change off, then edit the sidecars at will.
	oldLabel, oldHas := oldPod.Labels[keys.InjectLabel]
	newLabel, newHas := newPod.Labels[keys.InjectLabel]
	if oldLabel != newLabel || oldHas != newHas {
		problems = append(problems, Problem{ReasonNotCatalog, fmt.Sprintf(
			"label %q of an injected pod must not be changed or removed: the webhook reviews the pod's updates by it (delete the pod instead)", keys.InjectLabel)})
	}
	// The status says what the injector owns; the reconciler's mark says
	// which release last wrote it (a forged one makes that release back off).
	for _, k := range []string{keys.StatusAnnotation, keys.ReconcilerAnnotation} {
		if oldPod.Annotations[k] != newPod.Annotations[k] {
			problems = append(problems, Problem{ReasonNotCatalog, fmt.Sprintf(
				"annotation %q is written by cmp-injector and must not be changed or removed", k)})
		}
	}
	// What the pod asked for at creation (its plugins, an image override) is
	// fixed once injected: the pod's volumes and containers cannot follow an
	// edit, so the reconciler would only see a stale pod and, with rollout:
	// auto, restart its Deployment: a pod patch must not trigger that.
	for _, k := range changedRequestKeys(oldPod.Annotations, newPod.Annotations) {
		problems = append(problems, Problem{ReasonNotCatalog, fmt.Sprintf(
			"annotation %q of an injected pod must not be changed or removed: its plugins were injected at creation (change the workload's pod template instead)", k)})
	}
	for _, k := range changedConfigKeys(oldPod.Annotations, newPod.Annotations) {
		v, ok := newPod.Annotations[k]
		if !ok {
			problems = append(problems, Problem{ReasonNotCatalog, fmt.Sprintf(
				"annotation %q is written by cmp-injector and must not be removed", k)})
			continue
		}
		problems = append(problems, checkConfig(k, v, cat)...)
	}
	st, stProblems := ownedStatus(oldPod)
	if st == nil {
		return denied(nil, append(problems, stProblems...))
	}
	old := map[string]corev1.Container{}
	for _, c := range ownedContainers(oldPod, st, nil) {
		old[c.Name] = c
	}
	for _, c := range ownedContainers(newPod, st, nil) {
		if c.Image != old[c.Name].Image {
			problems = append(problems, checkImage(c, cat)...)
		}
		// Only pods/resize can change a running container's resources: an
		// owned sidecar's are the catalog's (one resized to 1Mi is OOM-killed
		// on every render).
		if !apiequality.Semantic.DeepEqual(c.Resources, old[c.Name].Resources) {
			problems = append(problems, Problem{ReasonNotCatalog, fmt.Sprintf(
				"the resources of container %q are the catalog's and must not be resized (change them in the catalog)", c.Name)})
		}
	}
	problems = append(problems, checkEphemeral(oldPod, newPod, st)...)
	if len(problems) > 0 {
		return denied(st.Plugins, problems)
	}
	return skipped(ReasonOwnedUnchanged)
}

// ownedStatus reads the status annotation, or says why it cannot be read.
func ownedStatus(pod *corev1.Pod) (*Status, []Problem) {
	var st Status
	if err := json.Unmarshal([]byte(pod.Annotations[keys.StatusAnnotation]), &st); err != nil {
		return nil, []Problem{{ReasonNotCatalog, fmt.Sprintf("annotation %q is not the status cmp-injector writes: %s",
			keys.StatusAnnotation, quoteBounded(err.Error()))}}
	}
	return &st, nil
}

// ownedContainers are the pod's containers and init containers the status
// names, and those named in also.
func ownedContainers(pod *corev1.Pod, st *Status, also []string) []corev1.Container {
	owned := map[string]bool{}
	for _, n := range slices.Concat(st.Containers, st.InitContainers, also) {
		owned[n] = true
	}
	var out []corev1.Container
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if owned[c.Name] {
				out = append(out, c)
			}
		}
	}
	return out
}

// CheckConfigAnnotations checks each config annotation the pod carries
// against its plugin's catalog config, injected or not: the kubelet projects
// the annotation into the sidecar as plugin.yaml, so one that is not the
// catalog's runs commands the admin never gave. The webhook refuses them on
// CREATE and UPDATE; doctor asks the same of pods that got past it (created
// or edited while it was down or under failurePolicy Ignore).
func CheckConfigAnnotations(pod *corev1.Pod, cat *catalog.Catalog) []Problem {
	var problems []Problem
	for _, k := range sortedAnnotationKeys(pod.Annotations) {
		if strings.HasPrefix(k, keys.ConfigAnnotationPrefix) {
			problems = append(problems, checkConfig(k, pod.Annotations[k], cat)...)
		}
	}
	return problems
}

// checkConfig: a config annotation must carry its plugin's catalog config.
func checkConfig(key, value string, cat *catalog.Catalog) []Problem {
	name := strings.TrimPrefix(key, keys.ConfigAnnotationPrefix)
	e := cat.Plugins[name]
	if e == nil || e.InlineYAML == "" || e.Config.ConfigMap != nil {
		return []Problem{{ReasonNotCatalog, fmt.Sprintf(
			"annotation %q is not a config the catalog gives (plugin %q has no inline config in catalog revision %s)", key, name, cat.Revision)}}
	}
	if value != e.InlineYAML {
		return []Problem{{ReasonNotCatalog, fmt.Sprintf(
			"annotation %q differs from plugin %q's config in catalog revision %s; only cmp-injector writes it (re-render pre-injected pods with cmp-injector inject)", key, name, cat.Revision)}}
	}
	return nil
}

// checkImage: the copy container runs the catalog's copy image, a plugin's
// sidecar the plugin's image or one its allowedImages allow.
func checkImage(c corev1.Container, cat *catalog.Catalog) []Problem {
	if c.Name == keys.CopyInitContainer || c.Name == keys.SocketsContainer {
		if c.Image != cat.Defaults.CopyImage {
			return []Problem{{ReasonImageNotAllowed, fmt.Sprintf(
				"container %q must run the catalog's copy image %q, not %s", c.Name, cat.Defaults.CopyImage, quoteBounded(c.Image))}}
		}
		return nil
	}
	name := strings.TrimPrefix(c.Name, keys.SidecarPrefix)
	e := cat.Plugins[name]
	if e == nil {
		return []Problem{{ReasonNotCatalog, fmt.Sprintf("container %q belongs to plugin %q, which is not in the catalog", c.Name, name)}}
	}
	if c.Image == e.Image {
		return nil
	}
	ok, err := catalog.ImageAllowed(c.Image, e.AllowedImages)
	if err != nil || !ok {
		return []Problem{{ReasonImageNotAllowed, fmt.Sprintf(
			"image %s of container %q is not allowed for plugin %q (catalog image %s, allowed: %s)",
			quoteBounded(c.Image), c.Name, name, e.Image, listOrNone(e.AllowedImages))}}
	}
	return nil
}

// changedConfigKeys are the config annotations added, changed or removed.
func changedConfigKeys(oldAnn, newAnn map[string]string) []string {
	return changedKeys(oldAnn, newAnn, func(k string) bool { return strings.HasPrefix(k, keys.ConfigAnnotationPrefix) })
}

// changedRequestKeys are the annotations by which the pod asked for its
// plugins (the plugins list, image overrides) that were added, changed or
// removed.
func changedRequestKeys(oldAnn, newAnn map[string]string) []string {
	return changedKeys(oldAnn, newAnn, func(k string) bool {
		return k == keys.PluginsAnnotation || strings.HasPrefix(k, keys.ImageAnnotationPrefix)
	})
}

// changedKeys are the annotations that match and were added, changed or
// removed (a key present on one side only counts, even with an empty value),
// sorted.
func changedKeys(oldAnn, newAnn map[string]string, match func(string) bool) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string]string{oldAnn, newAnn} {
		for k := range m {
			if !match(k) || seen[k] {
				continue
			}
			seen[k] = true
			ov, oldHas := oldAnn[k]
			nv, newHas := newAnn[k]
			if ov != nv || oldHas != newHas {
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}
