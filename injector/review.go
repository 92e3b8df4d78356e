package injector

import (
	"bytes"
	"errors"
	"mime"
	"net/http"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
)

// A review is decoded once, in one pass over the body: the envelope and the
// pods (request.object and, on UPDATE, request.oldObject) as slimPod. Then
// the transport routes it: what the webhook does not review is admitted with
// its reason, everything else goes to inject.Admit, which decides.

var admissionGVK = admissionv1.SchemeGroupVersion.WithKind("AdmissionReview")

// v1Semantics makes the decoder (json/v2's implementation, about twice as
// fast as encoding/json on a review, which was a quarter of a review's CPU
// under load) decode exactly as encoding/json does: case-insensitive names,
// the last of duplicate names, invalid UTF-8 replaced.
// FuzzSlimReviewMatchesWhole compares it with encoding/json's whole decode.
var v1Semantics = jsonv1.DefaultOptionsV1()

// slimReview is an AdmissionReview as the webhook decodes it.
type slimReview struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Request    *slimRequest `json:"request"`
}

// slimRequest is the part of an AdmissionRequest that the routing, the
// decisions and the webhook's logs and metrics read.
type slimRequest struct {
	UID         types.UID                   `json:"uid"`
	Resource    metav1.GroupVersionResource `json:"resource"`
	SubResource string                      `json:"subResource"`
	Name        string                      `json:"name"`
	Namespace   string                      `json:"namespace"`
	Operation   admissionv1.Operation       `json:"operation"`
	UserInfo    struct {
		Username string `json:"username"`
	} `json:"userInfo"`
	Object    slimObject `json:"object"`
	OldObject slimObject `json:"oldObject"`
	DryRun    *bool      `json:"dryRun"`
}

// slimObject is a pod of the review: decoded, or absent (null too, as
// RawExtension takes it), or not a pod.
type slimObject struct {
	slim *slimPod
	// src is the JSON slim was decoded from (see jsonSpan).
	src []byte
	// err is why the pod did not decode (set by decodeApart only).
	err error
}

// objectError marks a pod that did not decode in the one pass; the review is
// then decoded again by decodeApart to tell the envelope's errors from the
// pod's.
type objectError struct{ err error }

func (e *objectError) Error() string { return e.err.Error() }
func (e *objectError) Unwrap() error { return e.err }

// UnmarshalJSONFrom decodes the pod in the same pass as the envelope.
func (o *slimObject) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if dec.PeekKind() == 'n' {
		_, err := dec.ReadToken()
		return err
	}
	o.slim = new(slimPod)
	if err := jsonv2.UnmarshalDecode(dec, o.slim); err != nil {
		return &objectError{err}
	}
	return nil
}

// decodeApart decodes one pod of the review on its own, keeping its error:
// the slow path for a review whose pod does not decode (the API server never
// sends one), so that the envelope still decodes and the pod's error is its
// own, not the first error of the body.
func decodeApart(dec *jsontext.Decoder, o *slimObject) error {
	raw, err := dec.ReadValue()
	if err != nil || raw.Kind() == 'n' {
		return err
	}
	o.slim, o.src = new(slimPod), bytes.Clone(raw)
	if err := jsonv2.Unmarshal(o.src, o.slim, v1Semantics); err != nil {
		o.slim, o.err = nil, err
	}
	return nil
}

// pod is the decoded pod, or why there is none; the containers' resources
// only withResources (see slimContainer).
func (o *slimObject) pod(withResources bool) (*corev1.Pod, error) {
	switch {
	case o.err != nil:
		return nil, o.err
	case o.slim == nil:
		return nil, inject.ErrNoObject
	}
	return o.slim.pod(o.src, withResources)
}

// decodeReview checks and decodes an AdmissionReview body (the handler has
// bounded its size). Only JSON and admission.k8s.io/v1 are accepted: the API
// server sends reviews as application/json, and the webhook configuration
// registers v1 only. A pod that does not decode is no error here:
// inject.Admit denies it.
func decodeReview(contentType string, body []byte) (*slimRequest, error) {
	if mt, _, err := mime.ParseMediaType(contentType); err != nil || mt != "application/json" {
		return nil, badRequest(http.StatusUnsupportedMediaType, "content type must be application/json, got %q", contentType)
	}
	var review slimReview
	err := jsonv2.Unmarshal(body, &review, v1Semantics)
	if _, bad := errors.AsType[*objectError](err); bad {
		review = slimReview{}
		err = jsonv2.Unmarshal(body, &review, v1Semantics, jsonv2.WithUnmarshalers(jsonv2.UnmarshalFromFunc(decodeApart)))
	}
	if err != nil {
		return nil, badRequest(http.StatusBadRequest, "malformed AdmissionReview: %v", err)
	}
	if gvk := schema.FromAPIVersionAndKind(review.APIVersion, review.Kind); gvk != admissionGVK {
		return nil, badRequest(http.StatusBadRequest, "expected %s, got apiVersion %q kind %q",
			admissionGVK.GroupVersion().String()+" AdmissionReview", review.APIVersion, review.Kind)
	}
	if review.Request == nil {
		return nil, badRequest(http.StatusBadRequest, "AdmissionReview has no request")
	}
	if review.Request.UID == "" {
		return nil, badRequest(http.StatusBadRequest, "AdmissionReview request has no uid")
	}
	// Decoded in the one pass: spans point into the body, which the handler
	// keeps until it has answered.
	for _, o := range []*slimObject{&review.Request.Object, &review.Request.OldObject} {
		if o.src == nil {
			o.src = body
		}
	}
	return review.Request, nil
}

var podResource = metav1.GroupVersionResource{Version: "v1", Resource: "pods"}

// The pod subresources that change a running pod's containers: kubectl debug
// adds ephemeral containers, pods/resize changes resources in place. Their
// reviews carry the whole pod, so they are decided like any other update.
const (
	subresourceEphemeral = "ephemeralcontainers"
	subresourceResize    = "resize"
)

// reviewed says whether the webhook reviews req, and why not: pods' CREATEs
// and UPDATEs, of the main resource or of a subresource that changes what the
// injector owns (on UPDATE, the only operation they have).
func (req *slimRequest) reviewed() (inject.Reason, bool) {
	sub := req.SubResource == "" ||
		(req.Operation == admissionv1.Update && (req.SubResource == subresourceEphemeral || req.SubResource == subresourceResize))
	if req.Resource != podResource || !sub {
		return inject.ReasonNotPod, false
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return inject.ReasonNotCreate, false
	}
	return "", true
}

// decide is the Report for req: inject.Admit's, or Unreviewed's.
// trusted(username) says whether an UPDATE's user is the injector itself;
// enc keeps the JSON of what injection adds (the server's, for its life).
func (req *slimRequest) decide(cat *catalog.Catalog, enc *inject.Encodings, trusted func(username string) bool) *inject.Report {
	if reason, ok := req.reviewed(); !ok {
		return inject.Unreviewed(reason)
	}
	update := req.Operation == admissionv1.Update
	a := inject.Admission{Operation: req.Operation, Namespace: req.Namespace}
	a.Pod, a.PodErr = req.Object.pod(update)
	if update {
		a.OldPod, a.OldPodErr = req.OldObject.pod(update)
		a.Trusted = trusted != nil && trusted(req.UserInfo.Username)
	}
	return inject.Admit(&a, cat, enc)
}
