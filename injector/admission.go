package injector

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cmp-injector/cmp-injector/pkg/inject"
)

// maxReviewBytes bounds a request body. The API server stores objects of at
// most 1.5 MiB (etcd's default request limit) and a CREATE review carries only
// the new object, so 3 MiB leaves room for the envelope and JSON escaping.
const maxReviewBytes = 3 << 20

// requestError is a request refused before admission, answered with an HTTP status.
type requestError struct {
	code int
	msg  string
}

func (e *requestError) Error() string { return e.msg }

func badRequest(code int, format string, args ...any) error {
	return &requestError{code: code, msg: fmt.Sprintf(format, args...)}
}

// respond is the AdmissionResponse for report, which carries all of it.
func respond(uid types.UID, report *inject.Report) *admissionv1.AdmissionResponse {
	resp := &admissionv1.AdmissionResponse{UID: uid, Allowed: report.Allowed(), Result: result(report), Warnings: report.Warnings}
	if report.Patch != nil {
		pt := admissionv1.PatchTypeJSONPatch
		resp.PatchType, resp.Patch = &pt, report.Patch
	}
	return resp
}

// result is the status of the admission response: nil when allowed, else the
// denial's message with the HTTP status and Kubernetes reason of its fault.
func result(r *inject.Report) *metav1.Status {
	if r.Allowed() {
		return nil
	}
	s := &metav1.Status{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: r.Message()}
	switch r.Fault {
	case inject.FaultServer:
		s.Code, s.Reason = http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable
	case inject.FaultRequest:
		s.Code, s.Reason = http.StatusBadRequest, metav1.StatusReasonBadRequest
	}
	return s
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
	b.Write(appendUID(b.AvailableBuffer(), string(resp.UID)))
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

// appendUID appends uid as json.Marshal writes it. The API server's UIDs are
// UUIDs, hex digits and dashes that JSON writes as they are; any other UID
// (a review not from an API server) goes through json.Marshal.
func appendUID(dst []byte, uid string) []byte {
	for i := 0; i < len(uid); i++ {
		if c := uid[i]; c != '-' && (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			out, _ := json.Marshal(uid) // a string always marshals
			return append(dst, out...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, uid...)
	return append(dst, '"')
}

func asRequestError(err error) (*requestError, bool) {
	var re *requestError
	ok := errors.As(err, &re)
	return re, ok
}
