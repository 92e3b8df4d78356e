package adopt

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// editHost takes the adopted sidecars out of h, with the volumes only they
// used and the init containers that only filled those (copyutil's
// var-files, argocd-vault-plugin's download-tools; the injector's own copy
// container in our output), and adds the opt-in.
func (a *adopter) editHost(h *host, taken, names []string) {
	a.releaseAskPass(h, taken)
	rm := Removal{Object: h.obj.id()}
	isTaken := func(c *corev1.Container) bool { return slices.Contains(taken, c.Name) }
	orphans := map[string]bool{}
	for _, c := range allContainers(&h.spec) {
		if isTaken(c) {
			for _, m := range c.VolumeMounts {
				orphans[m.Name] = true
			}
		}
	}
	// A volume some kept container (or native sidecar) still mounts stays;
	// the copy steps are judged below.
	keep := func(c *corev1.Container) {
		if isTaken(c) {
			return
		}
		for _, m := range c.VolumeMounts {
			delete(orphans, m.Name)
		}
	}
	for i := range h.spec.Containers {
		keep(&h.spec.Containers[i])
	}
	for i := range h.spec.InitContainers {
		if c := &h.spec.InitContainers[i]; !isCopyStep(c) {
			keep(c)
		}
	}
	// Copy steps: init containers that mount nothing but orphans go; one
	// that also mounts a kept volume stays, with its orphans.
	var dropInit []string
	for _, c := range h.spec.InitContainers {
		if isTaken(&c) || !isCopyStep(&c) || len(c.VolumeMounts) == 0 {
			continue
		}
		if slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return !orphans[m.Name] }) {
			var kept []string
			for _, m := range c.VolumeMounts {
				if orphans[m.Name] {
					kept = append(kept, m.Name)
					delete(orphans, m.Name)
				}
			}
			if len(kept) > 0 {
				a.f.add(Warning, CodeInitContainerKept, h.obj.id(), "",
					"init container "+c.Name+" fills volume "+strings.Join(kept, ", ")+" for the removed sidecars but also mounts other volumes, so it and "+strings.Join(kept, ", ")+" stay",
					"remove them by hand if nothing needs them")
			}
			continue
		}
		dropInit = append(dropInit, c.Name)
	}
	for _, sc := range h.sidecars() {
		if !isTaken(sc.c) {
			continue
		}
		if sc.native {
			rm.InitContainers = append(rm.InitContainers, sc.c.Name)
		} else {
			rm.Containers = append(rm.Containers, sc.c.Name)
		}
	}
	rm.InitContainers = append(rm.InitContainers, dropInit...)
	for _, v := range h.spec.Volumes {
		if orphans[v.Name] {
			rm.Volumes = append(rm.Volumes, v.Name)
		}
	}
	container, init, volumes := []string{"spec", "containers"}, []string{"spec", "initContainers"}, []string{"spec", "volumes"}
	base := h.pod
	if h.operator() {
		base = h.repo
		container, init, volumes = []string{"sidecarContainers"}, []string{"initContainers"}, []string{"volumes"}
	}
	removeNamed(base, container, rm.Containers)
	removeNamed(base, init, rm.InitContainers)
	removeNamed(base, volumes, rm.Volumes)
	a.optIn(h, names, &rm)
	a.removed = append(a.removed, rm)
	h.obj.changed = true
	a.hostNotes(h)
}

// isCopyStep: an init container that runs to completion (not a native
// sidecar).
func isCopyStep(c *corev1.Container) bool {
	return c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways
}

func allContainers(s *corev1.PodSpec) []*corev1.Container {
	var out []*corev1.Container
	for i := range s.InitContainers {
		out = append(out, &s.InitContainers[i])
	}
	for i := range s.Containers {
		out = append(out, &s.Containers[i])
	}
	return out
}

// removeNamed drops the list items named in names from the list at path
// under m; an emptied list is removed.
func removeNamed(m map[string]any, path []string, names []string) {
	if len(names) == 0 {
		return
	}
	parent := child(m, false, path[:len(path)-1]...)
	if parent == nil {
		return
	}
	key := path[len(path)-1]
	items, _ := parent[key].([]any)
	kept := items[:0:0]
	for _, it := range items {
		item, _ := it.(map[string]any)
		if name, _ := item["name"].(string); slices.Contains(names, name) {
			continue
		}
		kept = append(kept, it)
	}
	if len(kept) == 0 {
		delete(parent, key)
		return
	}
	parent[key] = kept
}

// optIn labels the pod (template) for the webhook and names the plugins,
// after any the pod already asks for; our own status, config and reconciler
// annotations go (the injector writes them again).
func (a *adopter) optIn(h *host, names []string, rm *Removal) {
	var meta map[string]any
	if h.operator() {
		meta = h.repo
	} else {
		meta = child(h.pod, true, "metadata")
	}
	labels := child(meta, true, "labels")
	labels[keys.InjectLabel] = keys.EnabledValue
	ann := child(meta, true, "annotations")
	var want []string
	if cur, _ := ann[keys.PluginsAnnotation].(string); cur != "" {
		for _, n := range strings.Split(cur, ",") {
			if n = strings.TrimSpace(n); n != "" && !slices.Contains(want, n) {
				want = append(want, n)
			}
		}
	}
	for _, n := range names {
		if !slices.Contains(want, n) {
			want = append(want, n)
		}
	}
	ann[keys.PluginsAnnotation] = strings.Join(want, ", ")
	for k := range ann {
		if k == keys.StatusAnnotation || k == keys.ReconcilerAnnotation ||
			strings.HasPrefix(k, keys.ConfigAnnotationPrefix) || strings.HasPrefix(k, keys.ImageAnnotationPrefix) {
			delete(ann, k)
			rm.Keys = append(rm.Keys, "annotation "+k)
		}
	}
	slices.Sort(rm.Keys)
}

// hostNotes say how the change reaches a workload that something else
// renders, and that the namespace must opt in too.
func (a *adopter) hostNotes(h *host) {
	id := h.obj.id()
	meta := child(h.obj.doc, false, "metadata")
	labels := stringMap(meta["labels"])
	switch {
	case h.operator():
		a.f.add(Info, CodeOperatorManaged, id, "",
			"the operator renders the repo-server Deployment: the sidecars left spec.repo.sidecarContainers and the opt-in is in spec.repo.labels and spec.repo.annotations, which it copies into the pod template",
			"apply workload.yaml's ArgoCD resource; do not patch the Deployment, the operator reverts it")
	case labels["app.kubernetes.io/managed-by"] == "Helm" || labels["helm.sh/chart"] != "":
		plugins, _ := child(h.pod, false, "metadata", "annotations")[keys.PluginsAnnotation].(string)
		a.f.add(Info, CodeHelmManaged, id, "",
			"rendered by Helm (argo-helm): workload.yaml shows the result, but a helm upgrade would render the old one again",
			`in the chart's values, remove the adopted containers from repoServer.extraContainers and their volumes from repoServer.volumes (and repoServer.initContainers), and set repoServer.podLabels {"`+
				keys.InjectLabel+`": "true"} and repoServer.podAnnotations {"`+keys.PluginsAnnotation+`": "`+plugins+`"}`)
	}
	a.f.add(Info, CodeNamespaceLabel, id, "",
		"the injector only acts in namespaces that opt in",
		"kubectl label namespace "+a.namespaceOf(h.obj)+" "+keys.NamespaceEnabledLabel+"="+keys.EnabledValue)
}
