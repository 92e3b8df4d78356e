package inject

import (
	"encoding/json"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
)

var podResource = metav1.GroupVersionResource{Version: "v1", Resource: "pods"}

// The pod subresources that change a running pod's containers: kubectl debug
// adds ephemeral containers, pods/resize changes resources in place. Their
// reviews carry the whole pod, so Update decides them like any other update.
const (
	subresourceEphemeral = "ephemeralcontainers"
	subresourceResize    = "resize"
)

// reviewedSubresource: the main resource, or a subresource that changes what
// the injector owns (on UPDATE, the only operation they have).
func reviewedSubresource(req *admissionv1.AdmissionRequest) bool {
	switch req.SubResource {
	case "":
		return true
	case subresourceEphemeral, subresourceResize:
		return req.Operation == admissionv1.Update
	}
	return false
}

// Review decides one admission request: pod CREATEs are injected (or their
// owned parts checked when already injected), pod UPDATEs (ephemeral
// containers and resizes included) checked against the catalog unless
// trusted(username) says the user is the injector itself.
// Requests it cannot decide are Problems like any other denial: no catalog
// (cat is nil) and a pod that does not decode. The transport only encodes the
// Report.
func Review(req *admissionv1.AdmissionRequest, cat *catalog.Catalog, trusted func(username string) bool) *Report {
	if req.Resource != podResource || !reviewedSubresource(req) {
		return skipped(ReasonNotPod)
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return skipped(ReasonNotCreate)
	}
	if cat == nil {
		return noCatalog()
	}
	if req.Operation == admissionv1.Update {
		var pod, old corev1.Pod
		if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
			return denied(nil, []Problem{{ReasonMalformedPod, "cannot decode the pod: " + err.Error()}})
		}
		if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
			return denied(nil, []Problem{{ReasonMalformedPod, "cannot decode the pod before the update: " + err.Error()}})
		}
		return Update(&old, &pod, cat, trusted != nil && trusted(req.UserInfo.Username))
	}
	// CREATE, every pod of the cluster that matches the webhook's selector:
	// only what injection reads is decoded, and only the patch is built, as
	// it is all that is sent (see slim.go).
	pod, err := decodeSlimPod(req.Object.Raw)
	if err != nil {
		return denied(nil, []Problem{{ReasonMalformedPod, "cannot decode the pod: " + err.Error()}})
	}
	return injectCreated(pod, req.Namespace, cat)
}

// noCatalog denies while no valid catalog is loaded: fail closed.
func noCatalog() *Report {
	return denied(nil, []Problem{{ReasonNoCatalog, "no valid plugin catalog is loaded yet"}})
}

// injectCreated decides a CREATE of pod (decoded slim; only the patch is
// built, Report.Pod is nil) in the request's namespace, or the pod's own when
// the request names none.
func injectCreated(pod *corev1.Pod, namespace string, cat *catalog.Catalog) *Report {
	if namespace == "" {
		namespace = pod.Namespace
	}
	return injectPod(pod, namespace, cat, true)
}
