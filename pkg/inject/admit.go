package inject

import (
	"errors"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
)

// Admission is one admission request of a pod, as the webhook decoded it:
// the transport has already left out what the injector does not review
// (other resources and subresources, operations other than CREATE and
// UPDATE; see Unreviewed) and decodes only what the decisions read.
type Admission struct {
	Operation admissionv1.Operation
	// Namespace is the request's; a CREATE that names none takes the pod's.
	Namespace string
	// Pod is the request's object; OldPod the object before an UPDATE.
	Pod, OldPod *corev1.Pod
	// PodErr and OldPodErr say why Pod or OldPod could not be decoded.
	PodErr, OldPodErr error
	// Trusted: the request comes from a user the injector trusts (its own
	// service account, which keeps pods current with the catalog).
	Trusted bool
}

// ErrNoObject is the PodErr of a request that carries no object at all.
var ErrNoObject = errors.New("the request carries no object")

// Admit decides one admission request: a CREATE is injected (or its owned
// parts checked when already injected; only the patch is built, Report.Pod is
// nil, as the patch is all the webhook sends), an UPDATE checked against the
// catalog unless trusted. What it cannot decide is a Problem like any other
// denial: no catalog (cat is nil) and a pod that does not decode. The Report
// carries everything the response needs (Allowed, Fault, Patch, Warnings).
// enc keeps the JSON of what injection adds across reviews (nil: none kept).
func Admit(a *Admission, cat *catalog.Catalog, enc *Encodings) *Report {
	if cat == nil {
		return noCatalog()
	}
	if a.PodErr != nil {
		return malformedPod("cannot decode the pod: " + a.PodErr.Error())
	}
	if a.Operation == admissionv1.Update {
		if a.OldPodErr != nil {
			return malformedPod("cannot decode the pod before the update: " + a.OldPodErr.Error())
		}
		return updatePod(a.OldPod, a.Pod, cat, a.Trusted)
	}
	namespace := a.Namespace
	if namespace == "" {
		namespace = a.Pod.Namespace
	}
	return injectPod(a.Pod, namespace, cat, enc, true)
}

// Unreviewed is the Report of a request the webhook does not review (reason
// ReasonNotPod or ReasonNotCreate): admitted unchanged.
func Unreviewed(reason Reason) *Report { return skipped(reason) }

// noCatalog denies while no valid catalog is loaded: fail closed. The
// server's state, not the pod's fault, and its status says so.
func noCatalog() *Report {
	r := denied(nil, []Problem{{ReasonNoCatalog, "no valid plugin catalog is loaded yet"}})
	r.Fault = FaultServer
	return r
}

// malformedPod denies a request whose object is not a pod: the request's
// fault, not the pod's.
func malformedPod(msg string) *Report {
	r := denied(nil, []Problem{{ReasonMalformedPod, msg}})
	r.Fault = FaultRequest
	return r
}
