package inject

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// checkEphemeral decides the ephemeral containers an update of an injected
// pod adds (kubectl debug, pods/ephemeralcontainers). A debug container may
// not mount the volumes that carry the plugin server binary, the plugin
// sockets or what the injector added, and may not target a container the
// injector owns (targetContainerName shares its process namespace, and with
// it the container's files through /proc): either would let whoever may debug
// the pod replace a plugin's binary or answer on its socket for every
// application. Debugging the repo-server itself stays the admin's RBAC
// decision (docs/catalog.md).
func checkEphemeral(oldPod, newPod *corev1.Pod, st *Status) []Problem {
	had := map[string]bool{}
	for _, c := range oldPod.Spec.EphemeralContainers {
		had[c.Name] = true
	}
	guarded := slices.Concat([]string{keys.VarFilesVolume, keys.PluginsVolume}, st.Volumes)
	owned := slices.Concat(st.Containers, st.InitContainers)
	var problems []Problem
	for _, c := range newPod.Spec.EphemeralContainers {
		if had[c.Name] {
			continue
		}
		for _, m := range c.VolumeMounts {
			if slices.Contains(guarded, m.Name) {
				problems = append(problems, Problem{ReasonDebugAccess, fmt.Sprintf(
					"ephemeral container %s must not mount volume %q: it carries cmp-injector's plugin server, sockets or plugin files",
					quoteBounded(c.Name), m.Name)})
			}
		}
		if c.TargetContainerName != "" && slices.Contains(owned, c.TargetContainerName) {
			problems = append(problems, Problem{ReasonDebugAccess, fmt.Sprintf(
				"ephemeral container %s must not target container %q, which cmp-injector owns (it would share its processes and files)",
				quoteBounded(c.Name), c.TargetContainerName)})
		}
	}
	return problems
}
