package injector

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
)

// FuzzDecodeReview: any body gets either a decoded review with a request and a
// uid, or a 4xx request error; Review never panics on what decodes.
func FuzzDecodeReview(f *testing.F) {
	f.Add([]byte(podReview("u", "argocd", []byte(testPod), false)))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x"}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","operation":"CREATE","resource":{"version":"v1","resource":"pods"},"object":{"metadata":{"labels":{"cmp-injector.io/inject":"true"}}}}}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`null`))
	cat, err := catalog.Load("testdata/catalog.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		review, err := DecodeReview("application/json", body)
		if err != nil {
			re, ok := asRequestError(err)
			if !ok || re.code < 400 || re.code >= 500 || re.msg == "" {
				t.Fatalf("error %v is not a 4xx request error", err)
			}
			return
		}
		if review.Request == nil || review.Request.UID == "" {
			t.Fatal("accepted a review without request or uid")
		}
		resp, report := Review(review.Request, cat, nil)
		if resp.UID != review.Request.UID || report == nil {
			t.Fatal("response lost the uid or the report")
		}
		if !resp.Allowed && (resp.Result == nil || resp.Result.Message == "" || resp.Result.Code == http.StatusOK) {
			t.Fatalf("denial without a message: %+v", resp.Result)
		}
	})
}

// FuzzLiteReviewMatchesFull: whenever the whole decode accepts a review and
// its pod, the one-pass decode of a pod CREATE answers it byte for byte as the
// whole path does. (The one-pass decode skips fields injection does not read,
// so it does not refuse a malformed field there; the API server never sends
// one.)
func FuzzLiteReviewMatchesFull(f *testing.F) {
	f.Add([]byte(podReview("u", "argocd", []byte(testPod), false)))
	f.Add([]byte(podReview("u", "", bigPod(3), true)))
	f.Add([]byte(podReview("u", "argocd", []byte(`{"metadata":{"labels":{"cmp-injector.io/inject":"true"},"annotations":{"cmp-injector.io/plugins":"helm","cmp-injector.io/status":"{}"}}}`), false)))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","operation":"CREATE","resource":{"version":"v1","resource":"services"},"object":{}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","operation":"CREATE","resource":{"version":"v1","resource":"pods"},"object":null}}`))
	// encoding/json's semantics the one-pass decoder keeps: names matched
	// without case, the last of duplicate names, invalid UTF-8 replaced.
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","Request":{"UID":"x","Operation":"CREATE","resource":{"version":"v1","resource":"pods"},"Object":{"Metadata":{"LABELS":{"cmp-injector.io/inject":"true"},"annotations":{"cmp-injector.io/plugins":"helm"}}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","operation":"CREATE","resource":{"version":"v1","resource":"pods"},"object":{"metadata":{"labels":{"cmp-injector.io/inject":"false"},"labels":{"cmp-injector.io/inject":"true"},"annotations":{"cmp-injector.io/plugins":"helm` + "\xff" + `"}}}}}`))
	cat, err := catalog.Load("testdata/catalog.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		lite, ok := decodeLite("application/json", body)
		if !ok {
			return
		}
		review, err := DecodeReview("application/json", body)
		if err != nil {
			return // a malformed field the one-pass decode does not read
		}
		var whole corev1.Pod
		if json.Unmarshal(review.Request.Object.Raw, &whole) != nil {
			return
		}
		want, _ := Review(review.Request, cat, nil)
		got := respond(lite.UID, inject.ReviewLite(lite, cat))
		var wb, gb bytes.Buffer
		_ = encodeResponse(&wb, want)
		_ = encodeResponse(&gb, got)
		if !bytes.Equal(wb.Bytes(), gb.Bytes()) {
			t.Fatalf("one-pass answer differs:\n got %s\nwant %s", gb.String(), wb.String())
		}
	})
}

// TestEncodeResponseIsJSONMarshal: the directly written allowed response is
// json.Marshal's, byte for byte, and anything else still takes json.Marshal.
func TestEncodeResponseIsJSONMarshal(t *testing.T) {
	jp := admissionv1.PatchTypeJSONPatch
	other := admissionv1.PatchType("Other")
	for _, resp := range []*admissionv1.AdmissionResponse{
		{UID: "0d5bd1a6-7f0e-4c4e-9d3b-2b7cbf4c1e11", Allowed: true},
		{UID: "u", Allowed: true, PatchType: &jp, Patch: []byte(`[{"op":"add","path":"/a","value":1}]`)},
		{UID: "u", Allowed: true, PatchType: &jp},
		{UID: "u", Allowed: true, Patch: []byte{0, 1, 2, 250, 251}},
		{UID: "u", Allowed: true, PatchType: &other, Patch: []byte(`[]`)},
		{UID: `a"b<c>&\` + "\u00e9\x01", Allowed: true, PatchType: &jp, Patch: []byte(`[]`)},
		{UID: "u", Allowed: true, Warnings: []string{"w"}},
		{UID: "u", Allowed: true, AuditAnnotations: map[string]string{"a": "b"}},
		{UID: "u", Allowed: false, Result: &metav1.Status{Code: 403, Message: "no"}},
		{UID: "", Allowed: true},
	} {
		var buf bytes.Buffer
		buf.WriteString("reused buffer")
		buf.Reset()
		if err := encodeResponse(&buf, resp); err != nil {
			t.Fatal(err)
		}
		got := buf.Bytes()
		review := admissionv1.AdmissionReview{Response: resp}
		review.SetGroupVersionKind(admissionGVK)
		want, _ := json.Marshal(&review)
		if !bytes.Equal(got, want) {
			t.Errorf("encodeResponse(%+v)\n got %s\nwant %s", resp, got, want)
		}
	}
}
