package reconcile

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// What the reconciler does about a pod is decided here, from values only:
// the pod as cached, the catalog, its proven owner and what this replica
// remembers. plan reads no clock, client or logger, so every decision is a
// table test; the executor (reconcile.go) reads what plan needs and carries
// the steps out in order.

// planInput is everything one decision reads.
type planInput struct {
	Pod     *corev1.Pod
	Catalog *catalog.Catalog
	// Drift is inject.CheckDrift(Pod, Catalog), computed by newInput when the
	// pod is one the reconciler looks after and a catalog is loaded.
	Drift    *inject.Drift
	DriftErr error
	// Owner is what the cluster proves about the pod's owner, read only when
	// ownerWanted says a step needs it; OwnerErr is the API failing to tell.
	Owner    Owner
	OwnerErr error
	// Self names this release in its patches; Rollout is its rollout mode.
	Self, Rollout string
	// RolledFor is the revision this replica last restarted the owner's
	// Deployment for; Unproven the reason last reported for this pod's
	// unproven owner.
	RolledFor, Unproven string
	// Now stamps a restart (kubectl's restartedAt).
	Now time.Time
}

// newInput is the input for pod against cat before the owner is known.
func newInput(pod *corev1.Pod, cat *catalog.Catalog, self, rollout string, now time.Time) planInput {
	in := planInput{Pod: pod, Catalog: cat, Self: self, Rollout: rollout, Now: now}
	if cat != nil && ours(pod) {
		in.Drift, in.DriftErr = inject.CheckDrift(pod, cat)
	}
	return in
}

// ours: the injector injected the pod and it is not on its way out. Any
// other pod is never touched.
func ours(pod *corev1.Pod) bool {
	_, injected := pod.Annotations[keys.StatusAnnotation]
	return injected && pod.DeletionTimestamp == nil
}

// ownerWanted says whether the plan needs the pod's owner proven: the pod is
// stale and claims a controller, and either rollout is auto or the stale
// list changed (the workload hears of it too).
func ownerWanted(in planInput) bool {
	d := in.Drift
	if d == nil || len(d.Stale) == 0 || metav1.GetControllerOf(in.Pod) == nil {
		return false
	}
	return in.Rollout == RolloutAuto || staleChanged(d)
}

// staleChanged: the stale list differs from the one the pod's status
// recorded, so it is reported (once per change, not once per resync).
func staleChanged(d *inject.Drift) bool {
	return len(d.Stale) > 0 && !slices.Equal(d.Recorded.Stale, d.Stale)
}

// podPlan is what to do about one pod.
type podPlan struct {
	// Forget: the pod is not (or no longer) the reconciler's: drop what is
	// known of it and do nothing else.
	Forget bool
	// Idle: no catalog is loaded yet; nothing to do.
	Idle bool
	// Revision is the catalog's the plan was made with.
	Revision string
	// Stale is the pod's stale list for the gauge (nil: none, or unknown).
	Stale []inject.Difference
	// Conflict names the release whose mark the pod carries when this one
	// would act on it; the executor then holds off (conflicts.hold) before
	// any step, and the steps, which then patch the pod in any case, take it
	// back once the wait is over.
	Conflict string
	// Steps run in order; a failed write stops the rest and is retried.
	Steps []step
	// Retry, when set, is returned after the steps: something the plan
	// needed could not be read (the owner), so the pod is looked at again.
	Retry error
}

// step is one thing to do: exactly one field is set.
type step struct {
	// PatchPod sets these annotations on the pod (a merge patch guarded by
	// its resourceVersion).
	PatchPod map[string]string
	// Restart restarts a Deployment.
	Restart *restart
	// Event is recorded.
	Event *event
	// Log is written.
	Log *logLine
	// Unproven remembers the reason last reported for the pod's unproven
	// owner, and counts it.
	Unproven string
}

// restart is `kubectl rollout restart` of a proven Deployment, with the
// revision it is for on the Deployment's own metadata.
type restart struct {
	Namespace, Name string
	UID             types.UID
	Revision        string
	// Body is the strategic merge patch.
	Body []byte
}

// event is an Event about the pod or its proven owner.
type event struct {
	// On is the pod or an *corev1.ObjectReference to its proven owner.
	On                    runtime.Object
	Type, Reason, Message string
}

// logLine is one log entry.
type logLine struct {
	Warn   bool
	Msg    string
	Fields []zap.Field
}

// String renders a step for tests and debugging, one line each.
func (s step) String() string {
	switch {
	case s.PatchPod != nil:
		return "patch pod " + strings.Join(slices.Sorted(maps.Keys(s.PatchPod)), ",")
	case s.Restart != nil:
		return fmt.Sprintf("restart Deployment %s for %s", s.Restart.Name, s.Restart.Revision)
	case s.Event != nil:
		return fmt.Sprintf("event %s %s %s: %s", objectName(s.Event.On), s.Event.Type, s.Event.Reason, s.Event.Message)
	case s.Log != nil:
		level := "info"
		if s.Log.Warn {
			level = "warn"
		}
		return "log " + level + ": " + s.Log.Msg
	case s.Unproven != "":
		return "remember unproven: " + s.Unproven
	}
	return "nothing"
}

func objectName(o runtime.Object) string {
	switch o := o.(type) {
	case *corev1.Pod:
		return "Pod/" + o.Name
	case *corev1.ObjectReference:
		return o.Kind + "/" + o.Name
	}
	return fmt.Sprintf("%T", o)
}

// plan decides what to do about one pod. It is pure: same input, same plan.
func plan(in planInput) podPlan {
	pod, cat := in.Pod, in.Catalog
	if !ours(pod) {
		return podPlan{Forget: true}
	}
	if cat == nil {
		return podPlan{Idle: true}
	}
	key := pod.Namespace + "/" + pod.Name
	d := in.Drift
	if in.DriftErr != nil || d == nil {
		// Stale is nil: the gauge forgets the pod.
		return podPlan{Revision: cat.Revision, Steps: []step{logStep(true, "injected pod has an unreadable status; leaving it alone",
			zap.String("pod", key), zap.Error(in.DriftErr))}}
	}
	p := podPlan{Revision: cat.Revision, Stale: d.Stale}
	patch := d.Patch(pod)
	// Another release's mark matters only when this one would act on the
	// pod: patch it, or (rollout: auto) restart its Deployment.
	wouldAct := patch != nil || (in.Rollout == RolloutAuto && len(d.Stale) > 0)
	if other := otherWriter(pod, in.Self); other != "" && wouldAct {
		p.Conflict = other
		// Past the wait, the pod is taken back (and marked ours, below).
		// The other release, if it runs, then waits twice as long.
		if patch == nil {
			patch = map[string]string{}
		}
	}
	if patch != nil {
		patch[keys.ReconcilerAnnotation] = in.Self
		p.Steps = append(p.Steps, step{PatchPod: patch})
		p.Steps = append(p.Steps, reportSteps(in)...)
	}
	steps, retry := rolloutSteps(in)
	p.Steps = append(p.Steps, steps...)
	p.Retry = retry
	return p
}

// reportSteps log and send Events for what the pod patch changed: the live
// configs, and a stale list that changed (on the pod, and on its owner only
// when the cluster proves it: an Event on someone else's Deployment is what
// the pod's word alone could otherwise produce).
func reportSteps(in planInput) []step {
	pod, d, cat := in.Pod, in.Drift, in.Catalog
	key := pod.Namespace + "/" + pod.Name
	var out []step
	if len(d.Live) > 0 {
		names := slices.Sorted(maps.Keys(d.Live))
		out = append(out,
			logStep(false, "plugin config updated live", zap.String("pod", key), zap.String("revision", cat.Revision), zap.Strings("annotations", names)),
			eventStep(pod, corev1.EventTypeNormal, eventConfigUpdated,
				fmt.Sprintf("catalog revision %s: plugin.yaml updated (%v); the sidecars reload it without a restart", cat.Revision, names)))
	}
	if !staleChanged(d) {
		return out
	}
	msg := fmt.Sprintf("not current with catalog revision %s until restarted: %s", cat.Revision, d.StaleMessage())
	out = append(out,
		logStep(true, "injected pod is stale", zap.String("pod", key), zap.String("revision", cat.Revision), zap.String("differences", d.StaleMessage())),
		eventStep(pod, corev1.EventTypeWarning, eventStale, msg))
	switch {
	case metav1.GetControllerOf(pod) == nil:
	case in.OwnerErr != nil:
		out = append(out, logStep(true, "cannot read the stale pod's owner; the Event is on the pod only", zap.String("pod", key), zap.Error(in.OwnerErr)))
	case in.Owner.Ref != nil:
		out = append(out, eventStep(in.Owner.Ref, corev1.EventTypeWarning, eventStale, fmt.Sprintf("pod %s is %s", pod.Name, msg)))
	case in.Owner.Superseded:
		out = append(out, logStep(false, "the stale pod's ReplicaSet is being replaced by a rollout; the Event is on the pod only", zap.String("pod", key), zap.String("reason", in.Owner.Reason)))
	case in.Owner.Reason != "":
		out = append(out, logStep(false, "the stale pod's owner is not proven; the Event is on the pod only", zap.String("pod", key), zap.String("reason", in.Owner.Reason)))
	}
	return out
}

// rolloutSteps restart the Deployment owning a stale pod when the admin
// chose rollout: auto, as `kubectl rollout restart` does: a timestamp in its
// pod template's kubectl.kubernetes.io/restartedAt, which operators owning
// the Deployment keep. The revision it restarts for goes on the Deployment's
// own metadata and in this replica's memory (RolledFor), so every stale pod
// of the Deployment asks for one restart only; the memory holds even where
// an operator strips the metadata annotation. The Deployment must be proven
// to own the pod (ProveOwner); otherwise nothing is restarted and the pod,
// not any workload, gets a Warning Event, once per reason.
func rolloutSteps(in planInput) ([]step, error) {
	pod, d, cat := in.Pod, in.Drift, in.Catalog
	if in.Rollout != RolloutAuto || len(d.Stale) == 0 || metav1.GetControllerOf(pod) == nil {
		return nil, nil // a bare pod: nothing to restart it but the admin
	}
	if in.OwnerErr != nil {
		return nil, in.OwnerErr
	}
	dep := in.Owner.Deployment
	if in.Owner.Superseded {
		// The Deployment is rolling already; its pods of older ReplicaSets
		// go with the rollout. Reporting them as unproven put a Warning on
		// every old pod that changed after the reconciler's own restart.
		return nil, nil
	}
	if dep == nil {
		reason := in.Owner.Reason
		if reason == "" {
			reason = "its owner is not a Deployment"
		}
		if reason == in.Unproven {
			return nil, nil
		}
		key := pod.Namespace + "/" + pod.Name
		return []step{
			{Unproven: reason},
			logStep(true, "stale pod: its owner could not be proven, nothing is restarted", zap.String("pod", key), zap.String("reason", reason)),
			eventStep(pod, corev1.EventTypeWarning, eventOwnerUnproven,
				"stale, but not restarted (rollout: auto): ownership could not be proven: "+reason),
		}, nil
	}
	if dep.Annotations[keys.RolloutAnnotation] == cat.Revision || in.RolledFor == cat.Revision {
		return nil, nil
	}
	body, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{keys.RolloutAnnotation: cat.Revision}},
		"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{
			"annotations": map[string]string{keys.RestartedAtAnnotation: in.Now.UTC().Format(time.RFC3339)}}}}})
	return []step{
		{Restart: &restart{Namespace: dep.Namespace, Name: dep.Name, UID: dep.UID, Revision: cat.Revision, Body: body}},
		logStep(false, "rolled out stale pods", zap.String("deployment", dep.Namespace+"/"+dep.Name), zap.String("revision", cat.Revision)),
		eventStep(in.Owner.Ref, corev1.EventTypeNormal, eventRollout,
			fmt.Sprintf("restarting to apply catalog revision %s (rollout: auto): %s", cat.Revision, d.StaleMessage())),
	}, nil
}

// conflictSteps report, when a wait starts, that the pod is left to another
// release's reconciler for wait.
func conflictSteps(pod *corev1.Pod, other, self, revision string, wait time.Duration) []step {
	msg := fmt.Sprintf("last patched by the reconciler of release %s, whose catalog differs from this one's (revision %s); "+
		"leaving the pod to it for %s instead of patching it back. Two cmp-injector releases look after this namespace: "+
		"narrow their namespace selectors so that one does", other, revision, wait)
	return []step{
		logStep(true, "another release's reconciler patched this pod; backing off", zap.String("pod", pod.Namespace+"/"+pod.Name),
			zap.String("release", other), zap.String("self", self), zap.Duration("wait", wait)),
		eventStep(pod, corev1.EventTypeWarning, eventConflict, msg),
	}
}

func logStep(warn bool, msg string, fields ...zap.Field) step {
	return step{Log: &logLine{Warn: warn, Msg: msg, Fields: fields}}
}

func eventStep(on runtime.Object, typ, reason, msg string) step {
	return step{Event: &event{On: on, Type: typ, Reason: reason, Message: msg}}
}
