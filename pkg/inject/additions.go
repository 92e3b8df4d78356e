package inject

import (
	"encoding/json"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// additions is everything injection adds to one pod, decided once by build:
// the patch (patch) and the mutated pod (applyTo) are both written from it,
// so they cannot disagree. Containers are held as their specs: the webhook
// sends only the patch, whose container JSON is usually cached, so a
// container is built only when its JSON is not, or for the mutated pod.
type additions struct {
	volumes []named[corev1.Volume]
	// repoServer indexes the repo-server container, which gets rsMounts and rsEnv.
	repoServer int
	rsMounts   []named[corev1.VolumeMount]
	rsEnv      []named[corev1.EnvVar]
	// inits and mains are appended to the init and main containers.
	inits, mains []containerSpec
	// annotations in patch order, the status last.
	annotations []annotation
	status      *Status
	// server is where the sidecars take the plugin server from.
	server *ServerChoice
}

// named is an object fixed within a snapshot by its kind and name.
type named[T any] struct {
	key   namedKey
	value T
}

// annotation is one annotation added; key is its cache key when its value is
// the catalog's (an inline config), zero for the status.
type annotation struct {
	name, value string
	key         namedKey
}

// build decides what to add to pod for p: nothing is written yet.
func build(pod *corev1.Pod, cat *catalog.Catalog, p plan) *additions {
	// Two shared volumes, the token's, up to four of each plugin's, askpass.
	a := &additions{repoServer: p.repoServer, volumes: make([]named[corev1.Volume], 0, 4+4*len(p.entries))}
	status := &Status{Plugins: p.plugins, Revision: cat.Revision, Containers: []string{}, InitContainers: []string{}}
	uid := sidecarUID(pod, p.repoServer, cat)
	native := cat.Defaults.NativeSidecars
	server := serverChoice(p.entries)
	a.server = server
	addVolume := func(v corev1.Volume) {
		a.volumes = append(a.volumes, named[corev1.Volume]{namedKey{"volume", v.Name}, v})
		status.Volumes = append(status.Volumes, v.Name)
	}

	// Volumes: the shared pair only when missing (var-files only for the
	// copy: nothing else of ours uses it), then each plugin's own.
	have := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		have[v.Name] = true
	}
	shared := []string{keys.PluginsVolume}
	if server.Copies() {
		shared = []string{keys.VarFilesVolume, keys.PluginsVolume}
	}
	for _, n := range shared {
		if !have[n] {
			addVolume(emptyDir(n))
		}
	}
	addVolume(emptyDir(keys.NoTokenVolume))
	for _, e := range p.entries {
		for _, v := range pluginVolumes(cat, e) {
			addVolume(v)
		}
	}
	gitCreds := wantsGitCredentials(p.entries)
	if gitCreds {
		addVolume(askPassVolume())
	}

	// The repo-server needs the socket directory, and the askpass volume when
	// a plugin may have git credentials.
	rs := pod.Spec.Containers[p.repoServer]
	addMount := func(m corev1.VolumeMount) {
		a.rsMounts = append(a.rsMounts, named[corev1.VolumeMount]{namedKey{"mount", m.Name}, m})
	}
	if !hasMountPath(rs, keys.PluginSocketDir) {
		addMount(corev1.VolumeMount{Name: keys.PluginsVolume, MountPath: keys.PluginSocketDir})
	}
	if gitCreds && !hasMountPath(rs, keys.AskPassDir) {
		addMount(askPassMount())
	}

	// The repo-server's plugin settings the catalog tunes, each unless the
	// container sets it itself; the askpass socket's place.
	// The askpass variable goes in even beside an envFrom (env wins over
	// it): checkAskPass refused a container that sets it in env.
	env := missingEnv(rs, cat.Defaults.RepoServerEnv)
	if gitCreds {
		env = append(env, askPassEnv())
	}
	for _, e := range env {
		a.rsEnv = append(a.rsEnv, named[corev1.EnvVar]{namedKey{"env", e.Name}, e})
		status.RepoServerEnv = append(status.RepoServerEnv, e.Name)
	}

	// The copy init container, when the sidecars need it, goes last among
	// init containers so it follows any copyutil; native sidecars follow it
	// because they exec what it copies. The sockets container follows every
	// sidecar: as a native one its hook then sees every plugin's socket.
	if server.Copies() {
		a.inits = []containerSpec{copySpec{uid: uid}}
		status.InitContainers = append(status.InitContainers, keys.CopyInitContainer)
	}
	var sidecars []containerSpec
	var sidecarNames []string
	for _, e := range p.entries {
		sidecars = append(sidecars, sidecarSpec{plugin: e.Name, image: p.images[e.Name], server: server.serverPath(e), uid: uid, native: native})
		sidecarNames = append(sidecarNames, keys.SidecarName(e.Name))
	}
	sidecars = append(sidecars, socketsSpec{plugins: strings.Join(p.plugins, ","), uid: uid, native: native})
	sidecarNames = append(sidecarNames, keys.SocketsContainer)
	if native {
		a.inits = append(a.inits, sidecars...)
		status.InitContainers = append(status.InitContainers, sidecarNames...)
	} else {
		a.mains = sidecars
		status.Containers = append(status.Containers, sidecarNames...)
	}

	// Annotations: inline configs for the downwardAPI volumes, then the status.
	for _, e := range p.entries {
		if e.InlineYAML != "" && e.Config.ConfigMap == nil {
			a.annotations = append(a.annotations, annotation{keys.ConfigAnnotationPrefix + e.Name, e.InlineYAML, namedKey{"config", e.Name}})
		}
	}
	a.status = status
	a.annotations = append(a.annotations, annotation{name: keys.StatusAnnotation, value: status.JSON()})
	return a
}

// patch is the JSON Patch adding a to pod, as received: its paths follow the
// lengths of what pod has.
func (a *additions) patch(pod *corev1.Pod, cat *catalog.Catalog, enc *encCache) []byte {
	var ops patch
	appendAll(&ops, "/spec/volumes", len(pod.Spec.Volumes), namedJSONs(enc, a.volumes))
	rs := pod.Spec.Containers[a.repoServer]
	base := indexPath("/spec/containers", a.repoServer)
	appendAll(&ops, base+"/volumeMounts", len(rs.VolumeMounts), namedJSONs(enc, a.rsMounts))
	appendAll(&ops, base+"/env", len(rs.Env), namedJSONs(enc, a.rsEnv))
	appendAll(&ops, "/spec/initContainers", len(pod.Spec.InitContainers), containersJSON(enc, cat, a.inits))
	appendAll(&ops, "/spec/containers", len(pod.Spec.Containers), containersJSON(enc, cat, a.mains))
	kv := make(map[string]string, len(a.annotations))
	// A config's value is the catalog's: its JSON string is kept per snapshot.
	encoded := map[string]json.RawMessage{}
	order := make([]string, len(a.annotations))
	for i, an := range a.annotations {
		kv[an.name], order[i] = an.value, an.name
		if an.key != (namedKey{}) {
			encoded[an.name] = namedJSON(enc, &named[string]{an.key, an.value})
		}
	}
	addAnnotations(&ops, pod.Annotations != nil, kv, encoded, order)
	return ops.marshal()
}

// applyTo is a copy of in with a added, as the patch would make it.
func (a *additions) applyTo(in *corev1.Pod, cat *catalog.Catalog) *corev1.Pod {
	pod := in.DeepCopy()
	pod.Spec.Volumes = append(pod.Spec.Volumes, values(a.volumes)...)
	rs := &pod.Spec.Containers[a.repoServer]
	rs.VolumeMounts = append(rs.VolumeMounts, values(a.rsMounts)...)
	rs.Env = append(rs.Env, values(a.rsEnv)...)
	pod.Spec.InitContainers = append(pod.Spec.InitContainers, containers(cat, a.inits)...)
	pod.Spec.Containers = append(pod.Spec.Containers, containers(cat, a.mains)...)
	if pod.Annotations == nil {
		pod.Annotations = make(map[string]string, len(a.annotations))
	}
	for _, an := range a.annotations {
		pod.Annotations[an.name] = an.value
	}
	return pod
}

func namedJSONs[T any](enc *encCache, objs []named[T]) []json.RawMessage {
	out := make([]json.RawMessage, len(objs))
	for i := range objs {
		out[i] = namedJSON(enc, &objs[i])
	}
	return out
}

func values[T any](objs []named[T]) []T {
	var out []T
	for _, o := range objs {
		out = append(out, o.value)
	}
	return out
}

func containersJSON(enc *encCache, cat *catalog.Catalog, specs []containerSpec) []json.RawMessage {
	out := make([]json.RawMessage, len(specs))
	for i, s := range specs {
		out[i] = enc.containerJSON(s, cat)
	}
	return out
}

func containers(cat *catalog.Catalog, specs []containerSpec) []corev1.Container {
	var out []corev1.Container
	for _, s := range specs {
		out = append(out, s.container(cat))
	}
	return out
}
