package inject

import (
	"encoding/json"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
)

// The webhook decodes only the fields of a pod that injection reads: a pod's
// JSON is mostly env, probes, resources and volume sources, and decoding all of
// it into corev1.Pod (and deep-copying it) was most of a review's cost, growing
// with the pod. encoding/json skips the other fields without allocating.
// FuzzSlimDecodeMatchesFull and the golden tests (offline: whole pod; webhook:
// this) keep the decisions and patches identical. The API server has decoded
// and validated the object before calling a webhook, so fields left out here
// are never malformed.

// slimPod mirrors corev1.Pod with the same JSON names, for what resolve,
// apply, checkCollisions, sidecarUID, repoServerIndex, socketClashWarnings and
// verifyOwned read. Slices keep every element, since patch paths use their
// lengths and indexes.
type slimPod struct {
	Metadata struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		SecurityContext *slimSecurityContext `json:"securityContext"`
		InitContainers  []slimContainer      `json:"initContainers"`
		Containers      []slimContainer      `json:"containers"`
		Volumes         []struct {
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

type slimContainer struct {
	Name  string `json:"name"`
	Image string `json:"image"`
	// Command and Args recognise the repo-server container (reposerver.go).
	Command []string `json:"command"`
	Args    []string `json:"args"`
	Env     []struct {
		Name string `json:"name"`
	} `json:"env"`
	EnvFrom      []struct{} `json:"envFrom"`
	VolumeMounts []struct {
		Name      string `json:"name"`
		MountPath string `json:"mountPath"`
		SubPath   string `json:"subPath"`
	} `json:"volumeMounts"`
	SecurityContext *slimSecurityContext `json:"securityContext"`
}

// decodeSlimPod decodes raw into a corev1.Pod holding only what injection reads.
func decodeSlimPod(raw []byte) (*corev1.Pod, error) {
	var s slimPod
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	return s.pod(), nil
}

// pod is s as a corev1.Pod with only these fields set.
func (s *slimPod) pod() *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: s.Metadata.Name, Namespace: s.Metadata.Namespace,
		Labels: s.Metadata.Labels, Annotations: s.Metadata.Annotations}}
	if sc := s.Spec.SecurityContext; sc != nil {
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: sc.RunAsUser}
	}
	pod.Spec.InitContainers = slimContainers(s.Spec.InitContainers)
	pod.Spec.Containers = slimContainers(s.Spec.Containers)
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
	return pod
}

func slimContainers(in []slimContainer) []corev1.Container {
	if in == nil {
		return nil
	}
	out := make([]corev1.Container, len(in))
	for i, c := range in {
		o := &out[i]
		o.Name, o.Image, o.Command, o.Args = c.Name, c.Image, c.Command, c.Args
		if c.Env != nil {
			o.Env = make([]corev1.EnvVar, len(c.Env))
			for j, e := range c.Env {
				o.Env[j].Name = e.Name
			}
		}
		if c.EnvFrom != nil {
			o.EnvFrom = make([]corev1.EnvFromSource, len(c.EnvFrom))
		}
		if c.VolumeMounts != nil {
			o.VolumeMounts = make([]corev1.VolumeMount, len(c.VolumeMounts))
			for j, m := range c.VolumeMounts {
				o.VolumeMounts[j] = corev1.VolumeMount{Name: m.Name, MountPath: m.MountPath, SubPath: m.SubPath}
			}
		}
		if sc := c.SecurityContext; sc != nil {
			o.SecurityContext = &corev1.SecurityContext{RunAsUser: sc.RunAsUser}
		}
	}
	return out
}

// LiteReview is an AdmissionReview as the webhook decodes it first: the
// envelope and, in the same pass over the body, the injection fields of the
// pod (request.object). Only a pod CREATE is decided from it (ReviewLite);
// anything else is decoded again whole and goes through Review.
type LiteReview struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Request    *LiteRequest `json:"request"`
}

// LiteRequest is the part of an AdmissionRequest that Review and the
// webhook's logs and metrics read, with the pod's injection fields.
type LiteRequest struct {
	UID         types.UID                   `json:"uid"`
	Resource    metav1.GroupVersionResource `json:"resource"`
	SubResource string                      `json:"subResource"`
	Name        string                      `json:"name"`
	Namespace   string                      `json:"namespace"`
	Operation   admissionv1.Operation       `json:"operation"`
	DryRun      *bool                       `json:"dryRun"`
	// Object is nil when the request has none (or null): Review decides that.
	Object *slimPod `json:"object"`
}

// Lite says whether ReviewLite decides req as Review would: a CREATE with an
// object. Other requests (UPDATE reads both pods whole) take Review.
func (req *LiteRequest) Lite() bool {
	return req != nil && req.Operation == admissionv1.Create && req.Object != nil
}

// ReviewLite is Review for a request for which Lite is true; only the patch
// is built (it is all that is sent) and Report.Pod is nil.
func ReviewLite(req *LiteRequest, cat *catalog.Catalog) *Report {
	if req.Resource != podResource || req.SubResource != "" {
		return skipped(ReasonNotPod)
	}
	if cat == nil {
		return noCatalog()
	}
	return injectCreated(req.Object.pod(), req.Namespace, cat)
}
