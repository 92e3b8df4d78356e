package injector

import (
	"net/http"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
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
