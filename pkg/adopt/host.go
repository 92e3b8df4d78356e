package adopt

import (
	"encoding/json"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// host is where CMP sidecars live: a workload's pod (template), or the
// repo section of an argocd-operator ArgoCD resource, whose sidecars the
// operator adds to the repo-server Deployment it owns.
type host struct {
	obj *object
	// pod is the map holding metadata and spec (workloads); repo is
	// spec.repo (operator).
	pod  map[string]any
	repo map[string]any
	// spec is the typed view: for the operator, its sidecarContainers as
	// containers, initContainers and volumes.
	spec corev1.PodSpec
	// labels and annotations of the pod (template), or spec.repo's.
	labels, annotations map[string]string
	// repoServer is the index of the repo-server in spec.Containers; -1
	// when absent (always for the operator, which adds its own).
	repoServer int
	// image is the repo-server's image (the operator's, when the resource
	// names it).
	image string
	// status is the injector's status annotation, when the input is our
	// own injected output.
	status *inject.Status
}

func (h *host) operator() bool { return h.repo != nil }

// Names the install paths give the repo-server container, and its program:
// the catalog's defaults for recognising one.
var (
	repoServerNames   = []string{keys.RepoServerContainer, "repo-server"}
	repoServerProgram = "argocd-repo-server"
	// cmpServerProgram is Argo CD's plugin server (a symlink to argocd
	// that copyutil makes in var-files).
	cmpServerProgram = "argocd-cmp-server"
	// ourServerProgram is cmp-server, a drop-in for it: a hand-written
	// sidecar may run it already.
	ourServerProgram = "cmp-server"
)

// hostOf returns the host an object is, or nil.
func hostOf(o *object) (*host, error) {
	if isArgoCDResource(o) {
		return operatorHost(o)
	}
	tpath, ok := inject.TemplatePath(o.apiVersion, o.kind)
	if !ok {
		return nil, nil
	}
	pod := o.doc
	if len(tpath) > 0 {
		pod = child(o.doc, false, tpath...)
		if pod == nil {
			return nil, nil
		}
	}
	h := &host{obj: o, pod: pod, repoServer: -1}
	if err := decodeInto(pod["spec"], &h.spec); err != nil {
		return nil, err
	}
	meta := child(pod, false, "metadata")
	h.labels, h.annotations = stringMap(meta["labels"]), stringMap(meta["annotations"])
	h.repoServer = repoServerIndex(h.spec.Containers)
	if h.repoServer >= 0 {
		h.image = h.spec.Containers[h.repoServer].Image
	}
	if st, ok := h.annotations[keys.StatusAnnotation]; ok {
		var s inject.Status
		if json.Unmarshal([]byte(st), &s) == nil {
			h.status = &s
		}
	}
	if h.repoServer < 0 && len(h.sidecars()) == 0 {
		return nil, nil
	}
	return h, nil
}

func operatorHost(o *object) (*host, error) {
	repo := child(o.doc, true, "spec", "repo")
	h := &host{obj: o, repo: repo, repoServer: -1}
	var parts struct {
		Sidecars    []corev1.Container `json:"sidecarContainers"`
		Init        []corev1.Container `json:"initContainers"`
		Volumes     []corev1.Volume    `json:"volumes"`
		Image       string             `json:"image"`
		Version     string             `json:"version"`
		Labels      map[string]string  `json:"labels"`
		Annotations map[string]string  `json:"annotations"`
	}
	if err := decodeInto(repo, &parts); err != nil {
		return nil, err
	}
	h.spec = corev1.PodSpec{Containers: parts.Sidecars, InitContainers: parts.Init, Volumes: parts.Volumes}
	h.labels, h.annotations = parts.Labels, parts.Annotations
	var top struct {
		Image   string `json:"image"`
		Version string `json:"version"`
	}
	_ = decodeInto(o.doc["spec"], &top)
	img, ver := first(parts.Image, top.Image), first(parts.Version, top.Version)
	if img != "" && ver != "" {
		sep := ":"
		if strings.HasPrefix(ver, "sha256:") {
			sep = "@"
		}
		h.image = img + sep + ver
	}
	return h, nil
}

func first(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func stringMap(v any) map[string]string {
	m, _ := v.(map[string]any)
	out := make(map[string]string, len(m))
	for k, x := range m {
		if s, ok := x.(string); ok {
			out[k] = s
		}
	}
	return out
}

// repoServerIndex: a container named as the install paths name the
// repo-server, else one that runs its program.
func repoServerIndex(cs []corev1.Container) int {
	for i, c := range cs {
		if slices.Contains(repoServerNames, c.Name) {
			return i
		}
	}
	for i, c := range cs {
		if program(c) == repoServerProgram {
			return i
		}
	}
	return -1
}

// wrappers start the program named after them (Argo CD's image uses tini
// and entrypoint.sh, the operator uid_entrypoint.sh).
var wrappers = map[string]bool{"tini": true, "tini-static": true, "dumb-init": true, "entrypoint.sh": true, "uid_entrypoint.sh": true, "--": true}

// words are the container's command then args, wrappers and their flags
// skipped: words[0] is the program.
func words(c corev1.Container) []string {
	w := append(append([]string{}, c.Command...), c.Args...)
	for len(w) > 0 && wrappers[path.Base(w[0])] {
		w = w[1:]
		for len(w) > 0 && strings.HasPrefix(w[0], "-") {
			w = w[1:]
		}
	}
	return w
}

// program is the base name of what the container runs; empty when it names
// no command (the image's entrypoint).
func program(c corev1.Container) string {
	w := words(c)
	if len(w) == 0 {
		return ""
	}
	return path.Base(w[0])
}

// sidecar is a container adopt takes out of a host.
type sidecar struct {
	c *corev1.Container
	// native: an init container with restartPolicy Always.
	native bool
	// ours is the catalog name when the injector added it (the status
	// annotation lists it).
	ours string
}

// sidecars are the host's CMP sidecars: containers (and native sidecars)
// other than the repo-server that run a plugin server or mount the socket
// directory.
func (h *host) sidecars() []sidecar {
	var out []sidecar
	for i := range h.spec.Containers {
		if i == h.repoServer {
			continue
		}
		if c := &h.spec.Containers[i]; isPluginServer(c) {
			out = append(out, sidecar{c: c, ours: h.oursName(c.Name)})
		}
	}
	for i := range h.spec.InitContainers {
		c := &h.spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways && isPluginServer(c) {
			out = append(out, sidecar{c: c, native: true, ours: h.oursName(c.Name)})
		}
	}
	return out
}

func isPluginServer(c *corev1.Container) bool {
	if program(*c) == cmpServerProgram {
		return true
	}
	// The injector's own sidecars run the copied cmp-server; its copy init
	// container runs the image's, elsewhere.
	if w := words(*c); len(w) > 0 && w[0] == keys.PluginServerPath {
		return true
	}
	return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == keys.PluginSocketDir })
}

// oursSockets reports whether name is the injector's sockets container,
// listed as such by the host's status annotation.
func (h *host) oursSockets(name string) bool {
	return h.status != nil && name == keys.SocketsContainer &&
		(slices.Contains(h.status.Containers, name) || slices.Contains(h.status.InitContainers, name))
}

// oursName is the plugin whose sidecar the injector named name, or "".
func (h *host) oursName(name string) string {
	if h.status == nil {
		return ""
	}
	for _, p := range h.status.Plugins {
		if keys.SidecarName(p) == name {
			return p
		}
	}
	return ""
}

// volume is the host's volume called name, or nil.
func (h *host) volume(name string) *corev1.Volume {
	for i := range h.spec.Volumes {
		if h.spec.Volumes[i].Name == name {
			return &h.spec.Volumes[i]
		}
	}
	return nil
}

// mounters lists the containers (regular, then init) mounting volume name.
func (h *host) mounters(name string) (containers, inits []*corev1.Container) {
	mounts := func(c *corev1.Container) bool {
		return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == name })
	}
	for i := range h.spec.Containers {
		if c := &h.spec.Containers[i]; mounts(c) {
			containers = append(containers, c)
		}
	}
	for i := range h.spec.InitContainers {
		if c := &h.spec.InitContainers[i]; mounts(c) {
			inits = append(inits, c)
		}
	}
	return containers, inits
}

// filler is the first non-restartable init container that mounts volume
// name writable: what fills it before the sidecars start.
func (h *host) filler(name string) *corev1.Container {
	_, inits := h.mounters(name)
	for _, c := range inits {
		if c.RestartPolicy != nil {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.Name == name && !m.ReadOnly {
				return c
			}
		}
	}
	return nil
}

// repoServerMounts: the repo-server container's volume mount at mountPath
// (nil when none, or no repo-server in the host).
func (h *host) repoServerMount(mountPath string) *corev1.VolumeMount {
	if h.repoServer < 0 {
		return nil
	}
	for i, m := range h.spec.Containers[h.repoServer].VolumeMounts {
		if m.MountPath == mountPath {
			return &h.spec.Containers[h.repoServer].VolumeMounts[i]
		}
	}
	return nil
}
