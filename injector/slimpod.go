package injector

import (
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The webhook decodes only the fields of a pod that the decisions read: a
// pod's JSON is mostly env, probes and volume sources, and decoding all of it
// into corev1.Pod (and deep-copying it) was most of a review's cost, growing
// with the pod. The decoder skips the other fields without allocating.
// FuzzSlimPodMatchesWhole, FuzzSlimReviewMatchesWhole and the golden tests
// (offline: whole pod; webhook: this) keep the decisions and patches
// identical. The API server has decoded and validated the object before
// calling a webhook, so fields left out here are never malformed.

// slimPod mirrors corev1.Pod with the same JSON names, for the fields
// inject.Admit reads, which inject.PodFields lists: TestSlimPodDecodesPodFields
// holds the two equal. Slices keep every element, since patch paths use
// their lengths and indexes.
type slimPod struct {
	Metadata struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		SecurityContext *slimSecurityContext `json:"securityContext"`
		// ShareProcessNamespace: resolve refuses plugins in such a pod.
		ShareProcessNamespace *bool           `json:"shareProcessNamespace"`
		InitContainers        []slimContainer `json:"initContainers"`
		Containers            []slimContainer `json:"containers"`
		EphemeralContainers   []slimEphemeral `json:"ephemeralContainers"`
		Volumes               []struct {
			Name string `json:"name"`
			// ConfigMap tells socketClashWarnings where a hand-written
			// sidecar's plugin.yaml comes from.
			ConfigMap *slimConfigMapVolume `json:"configMap"`
		} `json:"volumes"`
	} `json:"spec"`
}

type slimConfigMapVolume struct {
	Name  string `json:"name"`
	Items []struct {
		Key  string `json:"key"`
		Path string `json:"path"`
	} `json:"items"`
}

type slimSecurityContext struct {
	RunAsUser *int64 `json:"runAsUser"`
}

type slimMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
	SubPath   string `json:"subPath"`
}

type slimContainer struct {
	Name  string `json:"name"`
	Image string `json:"image"`
	// Command and Args recognise the repo-server container.
	Command []string `json:"command"`
	Args    []string `json:"args"`
	Env     []struct {
		Name string `json:"name"`
	} `json:"env"`
	EnvFrom      []struct{}  `json:"envFrom"`
	VolumeMounts []slimMount `json:"volumeMounts"`
	// Resources: an UPDATE must not resize what the injector owns. Only
	// where they are is kept, and they are decoded only for an UPDATE:
	// nearly every container has them, and their maps and quantities were a
	// sixth of a large pod's allocations on CREATE, which never reads them.
	Resources       jsonSpan             `json:"resources"`
	SecurityContext *slimSecurityContext `json:"securityContext"`
}

// slimEphemeral is what checkEphemeral reads of a debug container.
type slimEphemeral struct {
	Name                string      `json:"name"`
	VolumeMounts        []slimMount `json:"volumeMounts"`
	TargetContainerName string      `json:"targetContainerName"`
}

// jsonSpan is where a JSON value is in the input it was decoded from.
type jsonSpan struct{ start, end int64 }

// UnmarshalJSONFrom records where the value is, without copying it.
func (s *jsonSpan) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	s.end = dec.InputOffset()
	s.start = s.end - int64(len(v))
	return nil
}

// pod is s, decoded from src, as a corev1.Pod with only these fields set;
// the containers' resources only withResources (an UPDATE), when they may
// not decode.
func (s *slimPod) pod(src []byte, withResources bool) (*corev1.Pod, error) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: s.Metadata.Name, Namespace: s.Metadata.Namespace,
		Labels: s.Metadata.Labels, Annotations: s.Metadata.Annotations}}
	if sc := s.Spec.SecurityContext; sc != nil {
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: sc.RunAsUser}
	}
	pod.Spec.ShareProcessNamespace = s.Spec.ShareProcessNamespace
	var err error
	if pod.Spec.InitContainers, err = slimContainers(s.Spec.InitContainers, src, withResources); err != nil {
		return nil, err
	}
	if pod.Spec.Containers, err = slimContainers(s.Spec.Containers, src, withResources); err != nil {
		return nil, err
	}
	if s.Spec.EphemeralContainers != nil {
		pod.Spec.EphemeralContainers = make([]corev1.EphemeralContainer, len(s.Spec.EphemeralContainers))
		for i, e := range s.Spec.EphemeralContainers {
			o := &pod.Spec.EphemeralContainers[i]
			o.Name, o.TargetContainerName, o.VolumeMounts = e.Name, e.TargetContainerName, slimMounts(e.VolumeMounts)
		}
	}
	if s.Spec.Volumes != nil {
		pod.Spec.Volumes = make([]corev1.Volume, len(s.Spec.Volumes))
		for i, v := range s.Spec.Volumes {
			pod.Spec.Volumes[i].Name = v.Name
			if cm := v.ConfigMap; cm != nil {
				src := &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}}
				for _, it := range cm.Items {
					src.Items = append(src.Items, corev1.KeyToPath{Key: it.Key, Path: it.Path})
				}
				pod.Spec.Volumes[i].ConfigMap = src
			}
		}
	}
	return pod, nil
}

func slimContainers(in []slimContainer, src []byte, withResources bool) ([]corev1.Container, error) {
	if in == nil {
		return nil, nil
	}
	out := make([]corev1.Container, len(in))
	for i, c := range in {
		o := &out[i]
		o.Name, o.Image, o.Command, o.Args = c.Name, c.Image, c.Command, c.Args
		if r := c.Resources; withResources && r.end > r.start {
			if err := jsonv2.Unmarshal(src[r.start:r.end], &o.Resources, v1Semantics); err != nil {
				return nil, err
			}
		}
		if c.Env != nil {
			o.Env = make([]corev1.EnvVar, len(c.Env))
			for j, e := range c.Env {
				o.Env[j].Name = e.Name
			}
		}
		if c.EnvFrom != nil {
			o.EnvFrom = make([]corev1.EnvFromSource, len(c.EnvFrom))
		}
		o.VolumeMounts = slimMounts(c.VolumeMounts)
		if sc := c.SecurityContext; sc != nil {
			o.SecurityContext = &corev1.SecurityContext{RunAsUser: sc.RunAsUser}
		}
	}
	return out, nil
}

func slimMounts(in []slimMount) []corev1.VolumeMount {
	if in == nil {
		return nil
	}
	out := make([]corev1.VolumeMount, len(in))
	for j, m := range in {
		out[j] = corev1.VolumeMount{Name: m.Name, MountPath: m.MountPath, SubPath: m.SubPath}
	}
	return out
}
