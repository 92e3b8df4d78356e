package inject

// PodFields are the fields of a pod that Admit reads, by their JSON names:
// "a.b" a field of an object, "a[]" each element of a list (every element is
// kept, since patch paths use the list's length and indexes; "a[]" alone
// keeps the elements but none of their fields), a field not broken down
// further is read whole.
//
// The webhook decodes only these (injector's slimPod, whose fields a test
// holds equal to this list), and a golden test runs every case with the pod
// cut down to them: a decision that starts reading another field fails it
// until the field is added here and to the decoder.
var PodFields = []string{
	"metadata.name",
	"metadata.namespace",
	"metadata.labels",
	"metadata.annotations",
	// sidecarUID: the pod's UID is the sidecars'.
	"spec.securityContext.runAsUser",
	// resolve refuses plugins in a pod that shares its process namespace.
	"spec.shareProcessNamespace",
	"spec.initContainers[].name",
	"spec.initContainers[].image",
	"spec.initContainers[].command",
	"spec.initContainers[].args",
	"spec.initContainers[].env[].name",
	"spec.initContainers[].envFrom[]",
	"spec.initContainers[].volumeMounts[].name",
	"spec.initContainers[].volumeMounts[].mountPath",
	"spec.initContainers[].volumeMounts[].subPath",
	"spec.initContainers[].resources",
	"spec.initContainers[].securityContext.runAsUser",
	// repoServerIndex recognises the repo-server by name, image, command and
	// args; missingEnv and checkAskPass read env names and whether there is
	// an envFrom; an UPDATE must not resize what the injector owns.
	"spec.containers[].name",
	"spec.containers[].image",
	"spec.containers[].command",
	"spec.containers[].args",
	"spec.containers[].env[].name",
	"spec.containers[].envFrom[]",
	"spec.containers[].volumeMounts[].name",
	"spec.containers[].volumeMounts[].mountPath",
	"spec.containers[].volumeMounts[].subPath",
	"spec.containers[].resources",
	"spec.containers[].securityContext.runAsUser",
	// checkEphemeral: a debug container must not reach what the injector owns.
	"spec.ephemeralContainers[].name",
	"spec.ephemeralContainers[].volumeMounts[].name",
	"spec.ephemeralContainers[].volumeMounts[].mountPath",
	"spec.ephemeralContainers[].volumeMounts[].subPath",
	"spec.ephemeralContainers[].targetContainerName",
	"spec.volumes[].name",
	// socketClashWarnings: where a hand-written sidecar's plugin.yaml comes from.
	"spec.volumes[].configMap.name",
	"spec.volumes[].configMap.items[].key",
	"spec.volumes[].configMap.items[].path",
}
