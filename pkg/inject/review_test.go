package inject

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Requests the webhook cannot decide are Reports like every other decision:
// a reason code, and for a denial a Problem with the sentence.
func TestReviewWebhookLevelDecisions(t *testing.T) {
	pod := []byte(`{"metadata":{"name":"p"},"spec":{"containers":[{"name":"a","image":"x"}]}}`)
	req := func(mod func(*admissionv1.AdmissionRequest)) *admissionv1.AdmissionRequest {
		r := &admissionv1.AdmissionRequest{Resource: podResource, Operation: admissionv1.Create, Namespace: "argocd",
			Object: runtime.RawExtension{Raw: pod}}
		if mod != nil {
			mod(r)
		}
		return r
	}
	cat := testCat(t)
	for name, tc := range map[string]struct {
		req      *admissionv1.AdmissionRequest
		noCat    bool
		decision Decision
		reason   Reason
		msg      string
	}{
		"not a pod": {req(func(r *admissionv1.AdmissionRequest) {
			r.Resource = metav1.GroupVersionResource{Version: "v1", Resource: "services"}
		}), false, Skipped, ReasonNotPod, ""},
		"subresource": {req(func(r *admissionv1.AdmissionRequest) { r.SubResource = "status" }), false, Skipped, ReasonNotPod, ""},
		// kubectl debug and in-place resize change a running pod's
		// containers: their UPDATEs are decided (here: a pod nobody injected).
		"ephemeral containers": {req(func(r *admissionv1.AdmissionRequest) {
			r.SubResource, r.Operation, r.OldObject.Raw = "ephemeralcontainers", admissionv1.Update, pod
		}), false, Skipped, ReasonNotInjected, ""},
		"resize": {req(func(r *admissionv1.AdmissionRequest) {
			r.SubResource, r.Operation, r.OldObject.Raw = "resize", admissionv1.Update, pod
		}), false, Skipped, ReasonNotInjected, ""},
		"delete":       {req(func(r *admissionv1.AdmissionRequest) { r.Operation = admissionv1.Delete }), false, Skipped, ReasonNotCreate, ""},
		"no catalog":   {req(nil), true, Denied, ReasonNoCatalog, "no valid plugin catalog is loaded yet"},
		"bad pod":      {req(func(r *admissionv1.AdmissionRequest) { r.Object.Raw = []byte(`{"spec":3}`) }), false, Denied, ReasonMalformedPod, "cannot decode the pod: "},
		"bad old pod":  {req(func(r *admissionv1.AdmissionRequest) { r.Operation = admissionv1.Update; r.OldObject.Raw = []byte(`[`) }), false, Denied, ReasonMalformedPod, "before the update"},
		"not labelled": {req(nil), false, Skipped, ReasonNotLabelled, ""},
	} {
		t.Run(name, func(t *testing.T) {
			c := cat
			if tc.noCat {
				c = nil
			}
			r := Review(tc.req, c, nil)
			if r.Decision != tc.decision || r.Reasons[0] != tc.reason {
				t.Fatalf("%s %v, want %s %s", r.Decision, r.Reasons, tc.decision, tc.reason)
			}
			if tc.decision == Denied && (len(r.Problems) != 1 || r.Problems[0].Reason != tc.reason ||
				!strings.HasPrefix(r.Message(), DenyPrefix) || !strings.Contains(r.Message(), tc.msg)) {
				t.Errorf("problems %+v, message %q", r.Problems, r.Message())
			}
		})
	}
}
