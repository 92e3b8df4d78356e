package inject

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// serveCommand runs the plugin server; probeCommand, with --wait, is the
// native sidecar's postStart hook. Both run the sidecar's server (the copy,
// or its image's: server.go), with the sidecar's env and mounts, so they
// resolve the same socket.
const (
	serveCommand   = "serve"
	probeCommand   = "probe"
	publishCommand = "publish"
)

// startGateTimeout bounds how long a native sidecar's server may take to
// answer on its socket: the budget the former startupProbe had (60 checks a
// second apart). Past it the hook fails with its reason and the kubelet
// restarts the sidecar.
const startGateTimeout = "60s"

// restricted is the Pod Security "restricted" profile plus a read-only root:
// plugins write only to their private /tmp. uid 0 sets no UID (the catalog's
// Assigned policy): the platform assigns one, and runAsNonRoot still holds.
func restricted(uid int64) *corev1.SecurityContext {
	yes, no := true, false
	var runAs *int64
	if uid > 0 {
		runAs = &uid
	}
	return &corev1.SecurityContext{
		RunAsUser:                runAs,
		RunAsNonRoot:             &yes,
		AllowPrivilegeEscalation: &no,
		ReadOnlyRootFilesystem:   &yes,
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func copyContainer(c *catalog.Catalog, uid int64) corev1.Container {
	return corev1.Container{
		Name:            keys.CopyInitContainer,
		Image:           c.Defaults.CopyImage,
		ImagePullPolicy: c.Defaults.CopyImagePullPolicy,
		Command:         []string{keys.CopyServerBinary, "copy", keys.PluginServerPath},
		Resources:       *c.Defaults.Resources.DeepCopy(),
		VolumeMounts:    []corev1.VolumeMount{{Name: keys.VarFilesVolume, MountPath: keys.VarFilesMountPath}, noTokenMount()},
		SecurityContext: restricted(uid),
	}
}

// sidecar is e's sidecar running the plugin server at server: the copy
// (keys.PluginServerPath, on var-files) or the one e's image carries.
func sidecar(c *catalog.Catalog, e *catalog.Entry, image string, uid int64, native bool, server string) corev1.Container {
	var mounts []corev1.VolumeMount
	if server == keys.PluginServerPath {
		// Read-only: one plugin must not be able to replace the server
		// binary that every other sidecar executes.
		mounts = append(mounts, corev1.VolumeMount{Name: keys.VarFilesVolume, MountPath: keys.VarFilesMountPath, ReadOnly: true})
	}
	mounts = append(mounts,
		// Only the plugin's own directory of the socket volume: its commands
		// cannot delete, replace or dial another plugin's socket. The
		// sockets container publishes it where the repo-server looks.
		corev1.VolumeMount{Name: keys.PluginsVolume, MountPath: keys.PluginSocketDir, SubPath: keys.PrivateSocketSubPath(e.Name)},
		corev1.VolumeMount{Name: keys.TmpVolumeName(e.Name), MountPath: "/tmp"},
		// The pod's /dev/shm is shared by its containers, and the
		// repo-server keeps SSH private keys there while it clones.
		corev1.VolumeMount{Name: keys.ShmVolumeName(e.Name), MountPath: keys.ShmDir},
	)
	if m, ok := configMount(e, keys.PluginConfigDir); ok {
		mounts = append(mounts, m)
	}
	mounts = append(mounts, extraMounts(e)...)
	env := sidecarEnv(e)
	if e.GitCredentials {
		mounts = append(mounts, askPassMount())
		env = append(env, askPassEnv())
	}
	ctr := corev1.Container{
		Name:            keys.SidecarName(e.Name),
		Image:           image,
		ImagePullPolicy: e.ImagePullPolicy,
		Command:         []string{server},
		Args:            []string{serveCommand},
		Env:             env,
		EnvFrom:         sidecarEnvFrom(e),
		Resources:       c.ResourcesFor(e),
		VolumeMounts:    mounts,
		SecurityContext: restricted(uid),
		// A server that exits at start (a plugin.yaml it cannot serve)
		// writes no termination log: its last log lines then are the
		// container's termination message, so the pod says why.
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	if native {
		makeNative(&ctr, startGate(server))
	}
	return ctr
}

// configMount places e's plugin.yaml at dir/plugin.yaml, read-only: the
// ConfigMap key as that file, or the downwardAPI volume as dir. ok is false
// for a plugin.yaml baked into the image.
func configMount(e *catalog.Entry, dir string) (m corev1.VolumeMount, ok bool) {
	switch {
	case e.Config.ConfigMap != nil:
		return corev1.VolumeMount{Name: keys.ConfigVolumeName(e.Name), MountPath: dir + "/" + keys.PluginConfigFile,
			SubPath: e.Config.ConfigMap.Key, ReadOnly: true}, true
	case e.InlineYAML != "":
		return corev1.VolumeMount{Name: keys.ConfigVolumeName(e.Name), MountPath: dir, ReadOnly: true}, true
	}
	return corev1.VolumeMount{}, false
}

// socketsContainer publishes every plugin's socket (cmp-server publish, from
// the copy image): the only container beside the repo-server that mounts the
// whole socket volume. It reads each plugin's name from the plugin's own
// config volume, read-only, when the catalog gives one; a plugin.yaml baked
// into the image names its socket by the first one its server makes, before
// any request can reach it. As a native sidecar it starts after every plugin,
// and its hook holds the repo-server until every socket is published.
func socketsContainer(c *catalog.Catalog, entries []*catalog.Entry, uid int64, native bool) corev1.Container {
	mounts := []corev1.VolumeMount{{Name: keys.PluginsVolume, MountPath: keys.PluginSocketDir}, noTokenMount()}
	routes := []string{"--config-dir", keys.SocketsConfigDir}
	for _, e := range entries {
		words, m := socketRoute(e)
		routes = append(routes, words...)
		mounts = append(mounts, m...)
	}
	ctr := corev1.Container{
		Name:                     keys.SocketsContainer,
		Image:                    c.Defaults.CopyImage,
		ImagePullPolicy:          c.Defaults.CopyImagePullPolicy,
		Command:                  append([]string{keys.CopyServerBinary, publishCommand}, routes...),
		Resources:                *c.Defaults.Resources.DeepCopy(),
		VolumeMounts:             mounts,
		SecurityContext:          restricted(uid),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	if native {
		makeNative(&ctr, &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: append([]string{
			keys.CopyServerBinary, publishCommand, "--wait", "--timeout", startGateTimeout,
			"--termination-log", corev1.TerminationMessagePathDefault}, routes...)}})
	}
	return ctr
}

// socketRoute is what the sockets container gets for e: the flags that say
// where e's socket name comes from, and the mount of e's config when the
// catalog gives one.
func socketRoute(e *catalog.Entry) ([]string, []corev1.VolumeMount) {
	if m, ok := configMount(e, keys.SocketsConfigDir+"/"+e.Name); ok {
		return []string{"--plugin", e.Name}, []corev1.VolumeMount{m}
	}
	return []string{"--image-configured", e.Name}, nil
}

// makeNative makes ctr a native sidecar held by its postStart gate.
func makeNative(ctr *corev1.Container, gate *corev1.LifecycleHandler) {
	always := corev1.ContainerRestartPolicyAlways
	ctr.RestartPolicy = &always
	ctr.Lifecycle = &corev1.Lifecycle{PostStart: gate}
}

// startGate holds the containers after a native sidecar (eventually the
// repo-server, which would otherwise enumerate sockets before the plugin
// listens and fall back to plain-directory manifests) until the plugin's
// socket answers CheckPluginConfiguration, and no longer.
//
// Why a postStart hook and not a startupProbe: the kubelet runs a container's
// postStart hook inside the same sync that starts the container
// (kuberuntime_container.go startContainer, "Step 4: execute the post start
// hook", which waits for the handler's result), and starts the next init
// container only in a later sync, once this one is running and started
// (computeInitContainerActions; the sidecar-containers concept page: "After a
// sidecar-style init container is running ... the kubelet then starts the next
// init container ... That status either becomes true because there is a
// process running in the container and no startup probe defined, or as a
// result of its startupProbe succeeding"). A hook that returns when the socket
// answers therefore gates as the startupProbe did, while a startupProbe is
// checked on its period (1 s at least), so each plugin waited for a tick.
//
// Nothing of the startupProbe remains: a probe left beside the hook would
// bring its period back (Started waits for its first success), and a
// liveness probe would exec a process per plugin per period for a failure
// the kubelet already sees (the server exits, restartPolicy Always restarts
// it). A failing hook makes the kubelet kill and restart the container; its
// reason, naming the plugin, is written to the termination log so the pod's
// status keeps it (the kubelet's own FailedPostStartHook event deliberately
// omits the hook's output).
func startGate(server string) *corev1.LifecycleHandler {
	return &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{
		server, probeCommand, "--wait", "--timeout", startGateTimeout,
		"--termination-log", corev1.TerminationMessagePathDefault,
	}}}
}

// shmSize bounds a sidecar's private /dev/shm as container runtimes bound
// the pod's (64 MiB); it is memory, counted against the sidecar's limit.
var shmSize = resource.MustParse("64Mi")

// pluginVolumes are the volumes one plugin owns: its /tmp and /dev/shm, its
// config unless the image bakes it, then its home and catalog volumes.
func pluginVolumes(cat *catalog.Catalog, e *catalog.Entry) []corev1.Volume {
	vols := []corev1.Volume{tmpVolume(cat, e), {
		Name: keys.ShmVolumeName(e.Name),
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: &shmSize,
		}},
	}}
	switch {
	case e.Config.ConfigMap != nil:
		vols = append(vols, corev1.Volume{
			Name: keys.ConfigVolumeName(e.Name),
			VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: e.Config.ConfigMap.Name},
			}},
		})
	case e.InlineYAML != "":
		vols = append(vols, corev1.Volume{
			Name: keys.ConfigVolumeName(e.Name),
			VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
				Items: []corev1.DownwardAPIVolumeFile{{
					Path: keys.PluginConfigFile,
					FieldRef: &corev1.ObjectFieldSelector{
						FieldPath: "metadata.annotations['" + keys.ConfigAnnotationPrefix + e.Name + "']",
					},
				}},
			}},
		})
	}
	return append(vols, extraVolumes(e)...)
}

// tmpVolume is the plugin's private /tmp: on the node's disk or in memory,
// bounded or not, as the catalog says (pkg/catalog/tmp.go says what each
// costs).
func tmpVolume(cat *catalog.Catalog, e *catalog.Entry) corev1.Volume {
	return corev1.Volume{
		Name: keys.TmpVolumeName(e.Name),
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: cat.TmpMediumFor(e), SizeLimit: cat.TmpSizeLimitFor(e),
		}},
	}
}

func emptyDir(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}
