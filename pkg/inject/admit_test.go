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
			r := Admit(&tc.a, c)
			if r.Decision != tc.decision || r.Reasons[0] != tc.reason {
				t.Fatalf("%s %v, want %s %s", r.Decision, r.Reasons, tc.decision, tc.reason)
			}
			res := r.Result()
			if r.Allowed() != (tc.decision != Denied) || (res == nil) != r.Allowed() {
				t.Fatalf("allowed %v, result %+v for %s", r.Allowed(), res, r.Decision)
			}
			if (r.Patch != nil) != (tc.decision == Injected) || r.Pod != nil {
				t.Errorf("patch %q, pod %v: want a patch only when injected, never the pod", r.Patch, r.Pod)
			}
			if tc.decision != Denied {
				return
			}
			if len(r.Problems) != 1 || r.Problems[0].Reason != tc.reason || res.Code != tc.code ||
				res.Message != r.Message() || !strings.HasPrefix(res.Message, denyPrefix) || !strings.Contains(res.Message, tc.msg) {
				t.Errorf("problems %+v, result %+v, want code %d and %q", r.Problems, res, tc.code, tc.msg)
			}
			wantReason := map[int32]metav1.StatusReason{http.StatusForbidden: metav1.StatusReasonForbidden,
				http.StatusServiceUnavailable: metav1.StatusReasonServiceUnavailable, http.StatusBadRequest: metav1.StatusReasonBadRequest}[tc.code]
			if res.Reason != wantReason {
				t.Errorf("status reason %s, want %s", res.Reason, wantReason)
			}
		})
	}
}

// Unreviewed requests are admitted unchanged with their reason.
func TestUnreviewed(t *testing.T) {
	for _, reason := range []Reason{ReasonNotPod, ReasonNotCreate} {
		r := Unreviewed(reason)
		if !r.Allowed() || r.Result() != nil || r.Patch != nil || r.Decision != Skipped || len(r.Reasons) != 1 || r.Reasons[0] != reason {
			t.Errorf("%s: %+v", reason, r)
		}
	}
}
