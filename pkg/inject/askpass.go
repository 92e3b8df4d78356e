package inject

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// Git credentials for plugins (provideGitCreds). Argo CD's repo-server hands a
// plugin a nonce and the path of its askpass socket, never the credentials:
// git in the plugin asks the socket for them. By default the socket lives in
// the repo-server's private /tmp, which no sidecar sees. For the plugins
// whose catalog entry consents (gitCredentials: true), and only for them, the
// injector moves the socket into a volume of its own (ARGOCD_ASK_PASS_SOCK in
// the repo-server) and mounts that volume at the same path in their sidecars.
// Every other sidecar has no path to it: a plugin without consent gets a
// nonce it cannot redeem.

// askPassSizeLimit bounds the volume: it only ever holds one socket.
var askPassSizeLimit = resource.MustParse("1Mi")

// wantsGitCredentials reports whether any of the plugins consents.
func wantsGitCredentials(entries []*catalog.Entry) bool {
	for _, e := range entries {
		if e.GitCredentials {
			return true
		}
	}
	return false
}

// askPassVolume is the in-memory volume that holds the socket.
func askPassVolume() corev1.Volume {
	return corev1.Volume{Name: keys.AskPassVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
		Medium: corev1.StorageMediumMemory, SizeLimit: &askPassSizeLimit}}}
}

// askPassMount mounts it at the path the repo-server announces.
func askPassMount() corev1.VolumeMount {
	return corev1.VolumeMount{Name: keys.AskPassVolume, MountPath: keys.AskPassDir}
}

// askPassEnv moves the repo-server's socket there; the sidecar carries it too,
// as Argo CD's documentation asks of both containers.
func askPassEnv() corev1.EnvVar {
	return corev1.EnvVar{Name: keys.EnvAskPassSock, Value: keys.AskPassSocket}
}

// checkAskPass refuses a repo-server that sets ARGOCD_ASK_PASS_SOCK itself
// when a consenting plugin is asked for: the injector must put the socket on
// the volume it shares, and a value of the pod's own (a path elsewhere) would
// give the sidecar a socket it cannot reach, failing git in it far from the
// cause. (Only the name is read: the webhook does not decode env values.)
func checkAskPass(pod *corev1.Pod, rs int, entries []*catalog.Entry) []Problem {
	if !wantsGitCredentials(entries) || rs < 0 {
		return nil
	}
	for _, e := range pod.Spec.Containers[rs].Env {
		if e.Name == keys.EnvAskPassSock {
			return []Problem{{ReasonNameCollision, fmt.Sprintf(
				"the repo-server container sets %s itself, but plugins with gitCredentials reach the askpass socket at %s on volume %s, which cmp-injector adds: remove the variable from the repo-server",
				keys.EnvAskPassSock, keys.AskPassSocket, keys.AskPassVolume)}}
		}
	}
	return nil
}
