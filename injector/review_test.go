package injector

import (
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
)

// The transport's routing: what the webhook does not review is admitted with
// its reason; the rest, pods that do not decode included, is inject.Admit's.
func TestReviewRouting(t *testing.T) {
	pod := []byte(`{"metadata":{"name":"p"},"spec":{"containers":[{"name":"a","image":"x"}]}}`)
	req := func(mod func(*admissionv1.AdmissionRequest)) []byte {
		r := &admissionv1.AdmissionRequest{UID: "u", Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Operation: admissionv1.Create, Namespace: "argocd", Object: runtime.RawExtension{Raw: pod}}
		if mod != nil {
			mod(r)
		}
		rv := admissionv1.AdmissionReview{Request: r}
		rv.SetGroupVersionKind(admissionGVK)
		b, err := json.Marshal(&rv)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cat, err := catalog.Load("testdata/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		body   []byte
		reason inject.Reason
		msg    string
	}{
		"not a pod": {req(func(r *admissionv1.AdmissionRequest) {
			r.Resource = metav1.GroupVersionResource{Version: "v1", Resource: "services"}
		}), inject.ReasonNotPod, ""},
		"subresource":       {req(func(r *admissionv1.AdmissionRequest) { r.SubResource = "status" }), inject.ReasonNotPod, ""},
		"resize on create":  {req(func(r *admissionv1.AdmissionRequest) { r.SubResource = "resize" }), inject.ReasonNotPod, ""},
		"delete":            {req(func(r *admissionv1.AdmissionRequest) { r.Operation = admissionv1.Delete }), inject.ReasonNotCreate, ""},
		"connect":           {req(func(r *admissionv1.AdmissionRequest) { r.Operation = admissionv1.Connect }), inject.ReasonNotCreate, ""},
		"not labelled":      {req(nil), inject.ReasonNotLabelled, ""},
		"bad old on create": {req(func(r *admissionv1.AdmissionRequest) { r.OldObject.Raw = []byte(`[]`) }), inject.ReasonNotLabelled, ""},
		"bad pod":           {req(func(r *admissionv1.AdmissionRequest) { r.Object.Raw = []byte(`{"spec":3}`) }), inject.ReasonMalformedPod, "cannot decode the pod: json: cannot unmarshal number"},
		"null pod":          {req(func(r *admissionv1.AdmissionRequest) { r.Object.Raw = []byte(`null`) }), inject.ReasonMalformedPod, "cannot decode the pod: the request carries no object"},
		"no pod":            {req(func(r *admissionv1.AdmissionRequest) { r.Object.Raw = nil }), inject.ReasonMalformedPod, "carries no object"},
		"bad old pod":       {req(func(r *admissionv1.AdmissionRequest) { r.Operation, r.OldObject.Raw = admissionv1.Update, []byte(`[]`) }), inject.ReasonMalformedPod, "before the update"},
		"bad resources": {req(func(r *admissionv1.AdmissionRequest) {
			r.Operation, r.OldObject.Raw = admissionv1.Update, []byte(`{"spec":{"containers":[{"resources":{"limits":{"cpu":"x"}}}]}}`)
		}), inject.ReasonMalformedPod, "before the update"},
		"bad resources ok": {req(func(r *admissionv1.AdmissionRequest) {
			r.Object.Raw = []byte(`{"spec":{"containers":[{"resources":{"limits":{"cpu":"x"}}}]}}`)
		}), inject.ReasonNotLabelled, ""},
		"ephemeral update": {req(func(r *admissionv1.AdmissionRequest) {
			r.SubResource, r.Operation, r.OldObject.Raw = "ephemeralcontainers", admissionv1.Update, pod
		}), inject.ReasonNotInjected, ""},
		"resize update": {req(func(r *admissionv1.AdmissionRequest) {
			r.SubResource, r.Operation, r.OldObject.Raw = "resize", admissionv1.Update, pod
		}), inject.ReasonNotInjected, ""},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := decodeReview("application/json; charset=utf-8", tc.body)
			if err != nil {
				t.Fatal(err)
			}
			report := r.decide(cat, nil)
			if report.Reasons[0] != tc.reason || !strings.Contains(report.Message(), tc.msg) {
				t.Errorf("%s %v %q, want %s and %q", report.Decision, report.Reasons, report.Message(), tc.reason, tc.msg)
			}
		})
	}
}
