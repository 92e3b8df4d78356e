package inject

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
)

// Parts are the pieces build assembles, exported for a renderer that
// assembles them outside Go (pkg/policy writes them into an admission policy
// the API server evaluates): every piece comes from the function the webhook
// uses, so the two cannot disagree on what a container or volume is, only on
// when it is added, which the policy's own tests compare with the webhook's.

// CopyContainerPart is the copy init container for sidecars running as uid.
func CopyContainerPart(cat *catalog.Catalog, uid int64) corev1.Container {
	return copyContainer(cat, uid)
}

// SidecarPart is e's sidecar with image, running as uid; copied says whether
// it runs the copied plugin server (some plugin of the pod lacks serverPath)
// or the one its image carries.
func SidecarPart(cat *catalog.Catalog, e *catalog.Entry, image string, uid int64, copied bool) corev1.Container {
	choice := &ServerChoice{Source: ServerFromImages}
	if copied {
		choice.Source = ServerCopied
	}
	return sidecar(cat, e, image, uid, cat.Defaults.NativeSidecars, choice.serverPath(e))
}

// SocketsContainerPart is the sockets container for no plugin: each plugin
// adds its SocketRoutePart to its command (and its postStart hook's, for
// native sidecars) and to its mounts, in the pod's order.
func SocketsContainerPart(cat *catalog.Catalog, uid int64) corev1.Container {
	return socketsContainer(cat, nil, uid, cat.Defaults.NativeSidecars)
}

// SocketRoutePart is what e adds to the sockets container.
func SocketRoutePart(e *catalog.Entry) ([]string, []corev1.VolumeMount) { return socketRoute(e) }

// PluginVolumesPart are the volumes e owns, in the order build adds them.
func PluginVolumesPart(cat *catalog.Catalog, e *catalog.Entry) []corev1.Volume {
	return pluginVolumes(cat, e)
}

// SharedVolumePart is a shared emptyDir (keys.PluginsVolume,
// keys.VarFilesVolume, keys.NoTokenVolume), added when the pod lacks it.
func SharedVolumePart(name string) corev1.Volume { return emptyDir(name) }

// AskPassParts are the askpass socket's volume, its repo-server mount and
// the variable that moves the socket there.
func AskPassParts() (corev1.Volume, corev1.VolumeMount, corev1.EnvVar) {
	return askPassVolume(), askPassMount(), askPassEnv()
}
