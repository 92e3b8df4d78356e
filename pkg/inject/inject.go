package inject

import (
	"fmt"
	"path"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// Inject decides for one pod being created in namespace. The input pod is not
// modified; an injected Report carries a mutated copy and the JSON Patch.
func Inject(pod *corev1.Pod, namespace string, cat *catalog.Catalog) *Report {
	return injectPod(pod, namespace, cat, nil, false)
}

// injectPod is Inject; with patchOnly it builds only the patch, not the mutated
// pod (no deep copy, Report.Pod nil): the webhook sends only the patch. enc
// keeps the JSON of what is added (nil: none kept).
func injectPod(pod *corev1.Pod, namespace string, cat *catalog.Catalog, enc *Encodings, patchOnly bool) *Report {
	if pod.Labels[keys.InjectLabel] != keys.EnabledValue {
		return skipped(ReasonNotLabelled)
	}
	rs := repoServerIndex(pod, cat)
	if rs < 0 {
		// Labelled, but not a repo-server (argo-helm's global.podLabels put
		// the label on every Argo CD workload): never denied, never changed.
		return skipped(ReasonNotRepoServer)
	}
	if _, done := pod.Annotations[keys.StatusAnnotation]; done {
		// An earlier pass (or the offline CLI) injected it; injecting again
		// must not change it, but what it owns must still be the catalog's.
		if problems := verifyOwned(pod, cat); len(problems) > 0 {
			return denied(nil, problems)
		}
		return skipped(ReasonAlreadyInjected)
	}
	plan, problems := resolve(pod, rs, namespace, cat)
	if len(problems) > 0 {
		return denied(plan.plugins, problems)
	}
	adds := build(pod, cat, plan)
	r := &Report{Decision: Injected, Reasons: []Reason{ReasonInjected}, Plugins: plan.plugins, Status: adds.status,
		Server: adds.server, Patch: adds.patch(pod, cat, enc.forCatalog(cat))}
	if !patchOnly {
		r.Pod = adds.applyTo(pod, cat)
	}
	r.Warnings = socketClashWarnings(pod, cat, plan.entries)
	return r
}

// plan is what resolve decided to add, before anything is built.
type plan struct {
	plugins []string
	entries []*catalog.Entry
	images  map[string]string
	// repoServer indexes the repo-server container in pod.Spec.Containers,
	// found once per decision (repoServerIndex).
	repoServer int
}

// resolve decides what to add to pod, whose repo-server container is rs.
func resolve(pod *corev1.Pod, rs int, namespace string, cat *catalog.Catalog) (plan, []Problem) {
	var problems []Problem
	raw, ok := pod.Annotations[keys.PluginsAnnotation]
	if !ok {
		return plan{}, []Problem{{ReasonMalformedAnnotation, fmt.Sprintf(
			"the pod has the label %s=%s but no annotation %s; list the plugins to inject, e.g. \"helm, kustomize\"",
			keys.InjectLabel, keys.EnabledValue, keys.PluginsAnnotation)}}
	}
	names, problems := parsePlugins(raw)
	p := plan{plugins: names, images: map[string]string{}, repoServer: rs}
	enabled := cat.Enabled(namespace)
	for _, name := range names {
		e := cat.Plugins[name]
		switch {
		case e == nil:
			problems = append(problems, Problem{ReasonUnknownPlugin, fmt.Sprintf(
				"plugin %q is not in the catalog (known: %s)", name, listOrNone(cat.Names))})
		case !cat.IsEnabled(namespace, name):
			problems = append(problems, Problem{ReasonPluginNotEnabled, fmt.Sprintf(
				"plugin %q is not enabled in namespace %q (enabled: %s)", name, namespace, listOrNone(enabled))})
		default:
			p.entries = append(p.entries, e)
			p.images[name] = e.Image
		}
	}
	problems = append(problems, checkAnnotations(pod, cat, &p)...)
	problems = append(problems, checkCollisions(pod, cat, p.entries)...)
	problems = append(problems, checkAskPass(pod, rs, p.entries)...)
	if sp := pod.Spec.ShareProcessNamespace; sp != nil && *sp && len(p.entries) > 0 {
		// Every sidecar runs as one UID: with one process namespace, a
		// plugin's command reads the others' env (their secrets) and files
		// through /proc/<pid>/environ and /proc/<pid>/root.
		problems = append(problems, Problem{ReasonSharedProcesses,
			"the pod sets shareProcessNamespace: true, which would let every plugin's commands read the other sidecars' env, secrets and files through /proc: remove it from the pod template"})
	}
	return p, problems
}

// checkAnnotations validates image overrides and refuses pods that set the
// config annotations the injector writes: they would replace the admin's config.
func checkAnnotations(pod *corev1.Pod, cat *catalog.Catalog, p *plan) []Problem {
	var problems []Problem
	requested := make(map[string]bool, len(p.plugins))
	for _, n := range p.plugins {
		requested[n] = true
	}
	for _, k := range sortedAnnotationKeys(pod.Annotations) {
		v := pod.Annotations[k]
		switch {
		case strings.HasPrefix(k, keys.ConfigAnnotationPrefix):
			problems = append(problems, Problem{ReasonNameCollision, fmt.Sprintf(
				"annotation %q is written by cmp-injector from the catalog and must not be set on the pod", k)})
		case strings.HasPrefix(k, keys.ImageAnnotationPrefix):
			name := strings.TrimPrefix(k, keys.ImageAnnotationPrefix)
			if !requested[name] {
				problems = append(problems, Problem{ReasonMalformedAnnotation, fmt.Sprintf(
					"annotation %q overrides the image of plugin %q, which the pod does not request", k, name)})
				continue
			}
			e := cat.Plugins[name]
			if e == nil {
				continue // already reported as unknown
			}
			ok, err := catalog.ImageAllowed(v, e.AllowedImages)
			if err != nil {
				// Say what is wrong without echoing the whole value.
				problems = append(problems, Problem{ReasonImageNotAllowed, fmt.Sprintf(
					"image %s for plugin %q is not a valid image reference", quoteBounded(v), name)})
				continue
			}
			if !ok {
				problems = append(problems, Problem{ReasonImageNotAllowed, fmt.Sprintf(
					"image %s for plugin %q is not allowed (allowed: %s)", quoteBounded(v), name, listOrNone(e.AllowedImages))})
				continue
			}
			p.images[name] = v
		}
	}
	return problems
}

// checkCollisions refuses to add a container or volume whose name the pod
// already uses: it is not ours, and we never touch what we do not own.
func checkCollisions(pod *corev1.Pod, cat *catalog.Catalog, entries []*catalog.Entry) []Problem {
	containers := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		containers[c.Name] = true
	}
	for _, c := range pod.Spec.Containers {
		containers[c.Name] = true
	}
	volumes := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = true
	}
	var problems []Problem
	want := []string{keys.CopyInitContainer, keys.SocketsContainer}
	wantVols := []string{keys.NoTokenVolume}
	if wantsGitCredentials(entries) {
		wantVols = append(wantVols, keys.AskPassVolume)
	}
	for _, e := range entries {
		want = append(want, keys.SidecarName(e.Name))
		for _, v := range pluginVolumes(cat, e) {
			wantVols = append(wantVols, v.Name)
		}
	}
	for _, n := range want {
		if containers[n] {
			problems = append(problems, Problem{ReasonNameCollision, fmt.Sprintf(
				"container %q already exists and was not added by cmp-injector", n)})
		}
	}
	for _, n := range wantVols {
		if volumes[n] {
			problems = append(problems, Problem{ReasonNameCollision, fmt.Sprintf(
				"volume %q already exists and was not added by cmp-injector", n)})
		}
	}
	return problems
}

// missingEnv is the part of want that c does not set. A container with envFrom
// gets nothing: a ConfigMap or Secret it reads might set the variable, and an
// explicit value must win.
func missingEnv(c corev1.Container, want []corev1.EnvVar) []corev1.EnvVar {
	if len(c.EnvFrom) > 0 {
		return nil
	}
	var out []corev1.EnvVar
	for _, w := range want {
		set := false
		for _, e := range c.Env {
			set = set || e.Name == w.Name
		}
		if !set {
			out = append(out, w)
		}
	}
	return out
}

func hasMountPath(c corev1.Container, p string) bool {
	for _, m := range c.VolumeMounts {
		if path.Clean(m.MountPath) == p {
			return true
		}
	}
	return false
}

// sidecarUID follows the repo-server: the socket is only writable by the UID
// that created it, so the sidecar runs as the repo-server container's
// runAsUser, else the pod's, else the catalog default (999; 0, meaning none,
// under the Assigned policy, where the platform gives every container of the
// pod the namespace's UID). Root is never inherited.
// rs indexes the repo-server container (repoServerIndex), -1 for none.
func sidecarUID(pod *corev1.Pod, rs int, cat *catalog.Catalog) int64 {
	if rs >= 0 {
		if sc := pod.Spec.Containers[rs].SecurityContext; sc != nil && sc.RunAsUser != nil && *sc.RunAsUser > 0 {
			return *sc.RunAsUser
		}
	}
	if sc := pod.Spec.SecurityContext; sc != nil && sc.RunAsUser != nil && *sc.RunAsUser > 0 {
		return *sc.RunAsUser
	}
	return cat.Defaults.RunAsUser
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func sortedAnnotationKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		if strings.HasPrefix(k, keys.ConfigAnnotationPrefix) || strings.HasPrefix(k, keys.ImageAnnotationPrefix) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
