package sidecarprobe

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

var (
	podKind  = schema.GroupKind{Kind: "Pod"}
	podsRes  = schema.GroupResource{Resource: "pods"}
	initCtr0 = field.NewPath("spec", "initContainers").Index(0)
)

// The API server's answers, in the shapes its apierrors take, and what each
// says about native sidecars.
func TestDecide(t *testing.T) {
	accepted := probePod("cmp-injector", "img")
	dropped := probePod("cmp-injector", "img")
	dropped.Spec.InitContainers[0].RestartPolicy = nil
	for _, c := range []struct {
		name    string
		created *corev1.Pod
		err     error
		native  bool
		// undecided: decide returns an *Undecided; forbidden: its Forbidden.
		undecided, forbidden bool
		says                 string
	}{
		{name: "accepted, restartPolicy kept (v1.29+, v1.28 with the gate on)", created: accepted, native: true, says: "accepts"},
		{name: "accepted, restartPolicy dropped (gate off, had the pod no lifecycle)", created: dropped, says: "dropped restartPolicy"},
		{name: "v1.27: lifecycle refused", err: apierrors.NewInvalid(podKind, "p", field.ErrorList{
			field.Forbidden(initCtr0.Child("lifecycle"), "may not be set for init containers")}),
			says: "spec.initContainers[0].lifecycle: Forbidden: may not be set for init containers"},
		{name: "v1.28-v1.32 with the gate off: restartPolicy dropped, lifecycle refused", err: apierrors.NewInvalid(podKind, "p", field.ErrorList{
			field.Forbidden(initCtr0.Child("lifecycle"), "may not be set for init containers without restartPolicy=Always")}),
			says: "without restartPolicy=Always"},
		{name: "restartPolicy refused", err: apierrors.NewInvalid(podKind, "p", field.ErrorList{
			field.NotSupported(initCtr0.Child("restartPolicy"), "Always", []string{"OnFailure"})}), says: "restartPolicy"},
		{name: "v1.27 with strict field validation", err: apierrors.NewBadRequest(`strict decoding error: unknown field "spec.initContainers[0].restartPolicy"`),
			says: "unknown field"},
		{name: "invalid for another field too", err: apierrors.NewInvalid(podKind, "p", field.ErrorList{
			field.Forbidden(initCtr0.Child("lifecycle"), "may not be set for init containers"),
			field.Required(field.NewPath("spec", "containers").Index(0).Child("image"), "")}),
			undecided: true, says: "no answer about native sidecars"},
		{name: "RBAC", err: apierrors.NewForbidden(podsRes, "", errors.New(`User "system:serviceaccount:cmp-injector:cmp-injector" cannot create resource "pods"`)),
			undecided: true, forbidden: true, says: "cannot create resource"},
		{name: "PodSecurity", err: apierrors.NewForbidden(podsRes, "p", errors.New(`violates PodSecurity "restricted:latest"`)),
			undecided: true, forbidden: true, says: "PodSecurity"},
		{name: "timeout", err: apierrors.NewTimeoutError("request timed out", 1), undecided: true, says: "timed out"},
		{name: "no API server", err: errors.New("dial tcp 10.0.0.1:443: connect: connection refused"), undecided: true, says: "connection refused"},
		{name: "accepted with no init container", created: &corev1.Pod{}, undecided: true, says: "no init container"},
	} {
		d, err := decide(c.created, c.err)
		u, isU := errors.AsType[*Undecided](err)
		switch {
		case c.undecided && (!isU || u.Forbidden != c.forbidden || !strings.Contains(err.Error(), c.says)):
			t.Errorf("%s: decision %+v, err %v; want undecided (forbidden %v) saying %q", c.name, d, err, c.forbidden, c.says)
		case !c.undecided && (err != nil || d.Native != c.native || !strings.Contains(d.Reason, c.says)):
			t.Errorf("%s: decision %+v, err %v; want native=%v saying %q", c.name, d, err, c.native, c.says)
		}
	}
}

// The probe pod has what an API server without native sidecars refuses in an
// injected one: restartPolicy: Always and a postStart hook on an init
// container; and nothing our webhook selects.
func TestProbePod(t *testing.T) {
	p := probePod("ns", "img")
	ic := p.Spec.InitContainers
	if len(ic) != 1 || ic[0].RestartPolicy == nil || *ic[0].RestartPolicy != corev1.ContainerRestartPolicyAlways ||
		ic[0].Lifecycle == nil || ic[0].Lifecycle.PostStart == nil {
		t.Errorf("init containers %+v: want one with restartPolicy Always and a postStart hook", ic)
	}
	if p.Name != "" || p.GenerateName == "" || len(p.Labels) != 0 || p.Namespace != "ns" {
		t.Errorf("metadata %+v: want a generated name, no labels, namespace ns", p.ObjectMeta)
	}
}

// Probe asks for a dry run, with strict field validation, in the namespace it
// is given; Resolver keeps a decision and asks again after no answer.
func TestResolver(t *testing.T) {
	client := fake.NewClientset()
	var calls int
	var answer error = apierrors.NewForbidden(podsRes, "", errors.New("cannot create pods"))
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		calls++
		ca := a.(k8stesting.CreateActionImpl)
		if o := ca.GetCreateOptions(); len(o.DryRun) != 1 || o.DryRun[0] != metav1.DryRunAll || o.FieldValidation != metav1.FieldValidationStrict {
			t.Errorf("create options %+v: want dryRun All, fieldValidation Strict", o)
		}
		if ca.GetNamespace() != "cmp-injector" {
			t.Errorf("created in %q", ca.GetNamespace())
		}
		if answer != nil {
			return true, nil, answer
		}
		return true, ca.GetObject(), nil
	})
	var decided []Decision
	r := &Resolver{Client: client, Namespace: "cmp-injector", Decided: func(d Decision) { decided = append(decided, d) }, Attempts: 2, Delay: time.Millisecond}
	_, _, err := r.Resolve("img")
	if err == nil || !strings.Contains(err.Error(), "needs the permission to create pods in namespace cmp-injector") || !strings.Contains(err.Error(), "2 tries") {
		t.Errorf("forbidden: err %v, want one that names the permission and the tries", err)
	}
	answer = nil
	for range 2 {
		native, reason, err := r.Resolve("img")
		if err != nil || !native || reason == "" {
			t.Errorf("accepted: %v %q %v", native, reason, err)
		}
	}
	if calls != 3 || len(decided) != 1 {
		t.Errorf("%d dry runs, %d decisions; want 3 (two forbidden, then one kept) and 1", calls, len(decided))
	}
	if _, err := Probe(context.Background(), client, "cmp-injector", "img"); err != nil {
		t.Error(err)
	}
}
