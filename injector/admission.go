package injector

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
)

// MaxReviewBytes bounds a request body. The API server stores objects of at
// most 1.5 MiB (etcd's default request limit) and a CREATE review carries only
// the new object, so 3 MiB leaves room for the envelope and JSON escaping.
const MaxReviewBytes = 3 << 20

var admissionGVK = admissionv1.SchemeGroupVersion.WithKind("AdmissionReview")

// requestError is a request refused before admission, answered with an HTTP status.
type requestError struct {
	code int
	msg  string
}

func (e *requestError) Error() string { return e.msg }

func badRequest(code int, format string, args ...any) error {
	return &requestError{code: code, msg: fmt.Sprintf(format, args...)}
}

// DecodeReview checks and decodes an AdmissionReview body. Only
// admission.k8s.io/v1 is accepted: the webhook configuration registers v1 only.
func DecodeReview(contentType string, body []byte) (*admissionv1.AdmissionReview, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "application/json" {
		return nil, badRequest(http.StatusUnsupportedMediaType, "content type must be application/json, got %q", contentType)
	}
	if len(body) > MaxReviewBytes {
		return nil, badRequest(http.StatusRequestEntityTooLarge, "request body larger than %d bytes", MaxReviewBytes)
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, badRequest(http.StatusBadRequest, "malformed AdmissionReview: %v", err)
	}
	if gvk := review.GroupVersionKind(); gvk != admissionGVK {
		return nil, badRequest(http.StatusBadRequest, "expected %s, got apiVersion %q kind %q",
			admissionGVK.GroupVersion().String()+" AdmissionReview", review.APIVersion, review.Kind)
	}
	if review.Request == nil {
		return nil, badRequest(http.StatusBadRequest, "AdmissionReview has no request")
	}
	if review.Request.UID == "" {
		return nil, badRequest(http.StatusBadRequest, "AdmissionReview request has no uid")
	}
	return &review, nil
}

// Review answers one admission request with inject.Review's decision: the
// response to send and the report behind it.
func Review(req *admissionv1.AdmissionRequest, cat *catalog.Catalog, trusted func(username string) bool) (*admissionv1.AdmissionResponse, *inject.Report) {
	report := inject.Review(req, cat, trusted)
	return respond(req.UID, report), report
}

// v1Semantics makes the one-pass decoder (json/v2's implementation, about
// twice as fast as encoding/json on a review, which was a quarter of a
// review's CPU under load) decode exactly as encoding/json does: case-
// insensitive names, the last of duplicate names, invalid UTF-8 replaced.
// FuzzLiteReviewMatchesFull compares it with the whole decode.
var v1Semantics = jsonv1.DefaultOptionsV1()

// decodeLite decodes a pod CREATE's review in one pass over the body (see
// inject.LiteReview); false for anything else, including every request
// DecodeReview refuses, which then takes the whole decode and its messages.
func decodeLite(contentType string, body []byte) (*inject.LiteRequest, bool) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "application/json" || len(body) > MaxReviewBytes {
		return nil, false
	}
	var review inject.LiteReview
	if jsonv2.Unmarshal(body, &review, v1Semantics) != nil || review.APIVersion != admissionGVK.GroupVersion().String() ||
		review.Kind != admissionGVK.Kind || review.Request == nil || review.Request.UID == "" || !review.Request.Lite() {
		return nil, false
	}
	return review.Request, true
}

// respond is the AdmissionResponse for report.
func respond(uid types.UID, report *inject.Report) *admissionv1.AdmissionResponse {
	resp := &admissionv1.AdmissionResponse{UID: uid, Allowed: true, Warnings: report.Warnings}
	switch report.Decision {
	case inject.Injected:
		pt := admissionv1.PatchTypeJSONPatch
		resp.PatchType, resp.Patch = &pt, report.Patch
	case inject.Denied:
		resp.Allowed = false
		resp.Result = &metav1.Status{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: report.Message()}
		// Two reasons are the request's or the server's state, not the
		// pod's fault; their status says so.
		switch report.Reasons[0] {
		case inject.ReasonNoCatalog:
			resp.Result.Code, resp.Result.Reason = http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable
		case inject.ReasonMalformedPod:
			resp.Result.Code, resp.Result.Reason = http.StatusBadRequest, metav1.StatusReasonBadRequest
		}
	}
	return resp
}

// encodeResponse wraps a response in a review of the same version it came in.
// An allowed response, nearly every one, is written directly: json.Marshal's
// reflection and its copy of the base64 patch were a tenth of a review.
// TestEncodeResponseIsJSONMarshal keeps the bytes json.Marshal's.
func encodeResponse(b *bytes.Buffer, resp *admissionv1.AdmissionResponse) error {
	if resp.Allowed && resp.Result == nil && resp.AuditAnnotations == nil && resp.Warnings == nil &&
		(resp.PatchType == nil || *resp.PatchType == admissionv1.PatchTypeJSONPatch) {
		writeAllowed(b, resp)
		return nil
	}
	out := admissionv1.AdmissionReview{Response: resp}
	out.SetGroupVersionKind(admissionGVK)
	raw, err := json.Marshal(&out)
	b.Write(raw)
	return err
}

// allowedHead is json.Marshal's start of an AdmissionReview response.
const allowedHead = `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","response":{"uid":`

func writeAllowed(b *bytes.Buffer, resp *admissionv1.AdmissionResponse) {
	b.Grow(len(allowedHead) + len(resp.UID) + 64 + base64.StdEncoding.EncodedLen(len(resp.Patch)))
	b.WriteString(allowedHead)
	b.Write(inject.AppendJSONString(b.AvailableBuffer(), string(resp.UID)))
	b.WriteString(`,"allowed":true`)
	if len(resp.Patch) > 0 {
		b.WriteString(`,"patch":"`)
		b.Write(base64.StdEncoding.AppendEncode(b.AvailableBuffer(), resp.Patch))
		b.WriteByte('"')
	}
	if resp.PatchType != nil {
		b.WriteString(`,"patchType":"JSONPatch"`)
	}
	b.WriteString("}}")
}

func asRequestError(err error) (*requestError, bool) {
	var re *requestError
	ok := errors.As(err, &re)
	return re, ok
}
