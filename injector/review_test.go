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
			report := r.decide(cat, nil, nil)
			if report.Reasons[0] != tc.reason || !strings.Contains(report.Message(), tc.msg) {
				t.Errorf("%s %v %q, want %s and %q", report.Decision, report.Reasons, report.Message(), tc.reason, tc.msg)
			}
		})
	}
}

// A pod that does not decode is the decision's (malformed_pod), not the
// transport's; a broken envelope is a 400 whether or not a pod is broken
// too, and anything but JSON a 415.
func TestDecodeReviewErrors(t *testing.T) {
	const head = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{`
	for _, tc := range []struct {
		name, contentType, body string
		code                    int
		msg                     string
	}{
		{"bad pod only", "application/json", head + `"uid":"u","object":{"spec":3},"oldObject":[]}}`, 0, ""},
		{"bad envelope and pod", "application/json", head + `"object":{"spec":3},"uid":7}}`, 400, "malformed AdmissionReview"},
		{"bad envelope after the pod", "application/json", head + `"uid":"u","object":{"spec":3},"dryRun":"yes"}}`, 400, "malformed AdmissionReview"},
		{"broken JSON in the pod", "application/json", head + `"uid":"u","object":{"spec":}}}`, 400, "malformed AdmissionReview"},
		{"no uid", "application/json", head + `"object":{}}}`, 400, "no uid"},
		{"v1beta1", "application/json", `{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"u"}}`, 400, "expected admission.k8s.io/v1 AdmissionReview"},
		{"not JSON", "text/plain", head + `"uid":"u"}}`, 415, "content type must be application/json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := decodeReview(tc.contentType, []byte(tc.body))
			if tc.code == 0 {
				if err != nil || req.UID != "u" {
					t.Fatalf("%v %+v", err, req)
				}
				if _, err := req.Object.pod(false); err == nil {
					t.Errorf("the broken pod decoded")
				}
				return
			}
			re, ok := asRequestError(err)
			if !ok || re.code != tc.code || !strings.Contains(re.msg, tc.msg) {
				t.Errorf("got %v, want %d %q", err, tc.code, tc.msg)
			}
		})
	}
}
