package inject

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// Requests the injector cannot decide are Reports like every other decision:
// a reason code, a Problem with the sentence, and the response's status.
func TestAdmitWebhookLevelDecisions(t *testing.T) {
	labelled := pod(map[string]string{keys.PluginsAnnotation: "helm"}, nil)
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "x"}}}}
	cat := testCat(t)
	for name, tc := range map[string]struct {
		a        Admission
		noCat    bool
		decision Decision
		reason   Reason
		code     int32
		msg      string
	}{
		"no catalog":   {Admission{Operation: admissionv1.Create, Pod: labelled}, true, Denied, ReasonNoCatalog, http.StatusServiceUnavailable, "no valid plugin catalog is loaded yet"},
		"bad pod":      {Admission{Operation: admissionv1.Create, PodErr: errors.New("boom")}, false, Denied, ReasonMalformedPod, http.StatusBadRequest, "cannot decode the pod: boom"},
		"no object":    {Admission{Operation: admissionv1.Create, PodErr: ErrNoObject}, false, Denied, ReasonMalformedPod, http.StatusBadRequest, "cannot decode the pod: the request carries no object"},
		"bad old pod":  {Admission{Operation: admissionv1.Update, Pod: plain, OldPodErr: errors.New("boom")}, false, Denied, ReasonMalformedPod, http.StatusBadRequest, "cannot decode the pod before the update: boom"},
		"old pod ok":   {Admission{Operation: admissionv1.Create, Pod: plain, OldPodErr: errors.New("not read on CREATE")}, false, Skipped, ReasonNotLabelled, 0, ""},
		"not labelled": {Admission{Operation: admissionv1.Create, Pod: plain, Namespace: "argocd"}, false, Skipped, ReasonNotLabelled, 0, ""},
		// kubectl debug and in-place resize change a running pod's
		// containers: their UPDATEs are decided (here: a pod nobody injected).
		"update not injected": {Admission{Operation: admissionv1.Update, Pod: plain, OldPod: plain}, false, Skipped, ReasonNotInjected, 0, ""},
		"denied":              {Admission{Operation: admissionv1.Create, Pod: pod(map[string]string{keys.PluginsAnnotation: "nope"}, nil), Namespace: "argocd"}, false, Denied, ReasonUnknownPlugin, http.StatusForbidden, `plugin "nope" is not in the catalog`},
		"injected":            {Admission{Operation: admissionv1.Create, Pod: labelled, Namespace: "argocd"}, false, Injected, ReasonInjected, 0, ""},
	} {
		t.Run(name, func(t *testing.T) {
			c := cat
			if tc.noCat {
				c = nil
			}
			r := Admit(&tc.a, c, nil)
			if r.Decision != tc.decision || r.Reasons[0] != tc.reason {
				t.Fatalf("%s %v, want %s %s", r.Decision, r.Reasons, tc.decision, tc.reason)
			}
			if r.Allowed() != (tc.decision != Denied) {
				t.Fatalf("allowed %v for %s", r.Allowed(), r.Decision)
			}
			if (r.Patch != nil) != (tc.decision == Injected) || r.Pod != nil {
				t.Errorf("patch %q, pod %v: want a patch only when injected, never the pod", r.Patch, r.Pod)
			}
			if tc.decision != Denied {
				return
			}
			// The webhook answers FaultServer 503, FaultRequest 400, FaultPod 403.
			wantFault := map[int32]Fault{http.StatusForbidden: FaultPod, http.StatusServiceUnavailable: FaultServer, http.StatusBadRequest: FaultRequest}[tc.code]
			msg := r.Message()
			if len(r.Problems) != 1 || r.Problems[0].Reason != tc.reason || r.Fault != wantFault ||
				!strings.HasPrefix(msg, DenyPrefix) || !strings.Contains(msg, tc.msg) {
				t.Errorf("problems %+v, fault %d, message %q: want fault %d and %q", r.Problems, r.Fault, msg, wantFault, tc.msg)
			}
		})
	}
}

// Unreviewed requests are admitted unchanged with their reason.
func TestUnreviewed(t *testing.T) {
	for _, reason := range []Reason{ReasonNotPod, ReasonNotCreate} {
		r := Unreviewed(reason)
		if !r.Allowed() || r.Patch != nil || r.Decision != Skipped || len(r.Reasons) != 1 || r.Reasons[0] != reason {
			t.Errorf("%s: %+v", reason, r)
		}
	}
}
