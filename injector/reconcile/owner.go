package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// rollout restarts the Deployment owning a stale pod when the admin chose
// rollout: auto, as `kubectl rollout restart` does: a timestamp in its pod
// template's kubectl.kubernetes.io/restartedAt, which operators owning the
// Deployment keep. The revision it restarts for goes on the Deployment's own
// metadata and in memory, so every stale pod of the Deployment asks for one
// restart only; the memory holds even where an operator strips the metadata
// annotation. The Deployment must be proven to own the pod (ProveOwner);
// otherwise nothing is restarted and the pod, not any workload, gets a
// Warning Event.
func (r *Reconciler) rollout(ctx context.Context, pod *corev1.Pod, d *inject.Drift, cat *catalog.Catalog) error {
	if r.opts.Rollout != RolloutAuto || len(d.Stale) == 0 {
		return nil
	}
	if metav1.GetControllerOf(pod) == nil {
		return nil // a bare pod: nothing to restart it but the admin
	}
	owner, err := ProveOwner(ctx, r.opts.Client, pod)
	if err != nil {
		return err
	}
	if owner.Deployment == nil {
		reason := owner.Reason
		if reason == "" {
			reason = "its owner is not a Deployment"
		}
		r.ownerUnproven(pod, reason)
		return nil
	}
	dep := owner.Deployment
	if dep.Annotations[keys.RolloutAnnotation] == cat.Revision || r.rolledFor(dep.UID) == cat.Revision {
		return nil
	}
	body, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{keys.RolloutAnnotation: cat.Revision}},
		"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{
			"annotations": map[string]string{keys.RestartedAtAnnotation: time.Now().UTC().Format(time.RFC3339)}}}}})
	if _, err := r.opts.Client.AppsV1().Deployments(pod.Namespace).Patch(ctx, dep.Name, types.StrategicMergePatchType, body,
		metav1.PatchOptions{FieldManager: "cmp-injector"}); err != nil {
		return fmt.Errorf("restarting Deployment %s: %w", dep.Name, err)
	}
	r.setRolledFor(dep.UID, cat.Revision)
	r.metrics.rollouts.Inc()
	r.log.Info("rolled out stale pods", zap.String("deployment", pod.Namespace+"/"+dep.Name), zap.String("revision", cat.Revision))
	r.recorder.Event(owner.Ref, corev1.EventTypeNormal, EventRollout, fmt.Sprintf(
		"restarting to apply catalog revision %s (rollout: auto): %s", cat.Revision, d.StaleMessage()))
	return nil
}

// rolledFor is the catalog revision this replica last restarted the
// Deployment with uid for ("" for none).
func (r *Reconciler) rolledFor(uid types.UID) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rolled[uid]
}

func (r *Reconciler) setRolledFor(uid types.UID, revision string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rolled[uid] = revision
}

// ownerUnproven reports, once per pod and reason, that a stale pod's owner
// could not be proven and nothing is restarted. The Event is on the pod: the
// workload it claims may be someone else's.
func (r *Reconciler) ownerUnproven(pod *corev1.Pod, reason string) {
	key := pod.Namespace + "/" + pod.Name
	r.mu.Lock()
	seen := r.unproven[key] == reason
	r.unproven[key] = reason
	r.mu.Unlock()
	if seen {
		return
	}
	r.metrics.ownerUnproven.Inc()
	r.log.Warn("stale pod: its owner could not be proven, nothing is restarted", zap.String("pod", key), zap.String("reason", reason))
	r.recorder.Event(pod, corev1.EventTypeWarning, EventOwnerUnproven,
		"stale, but not restarted (rollout: auto): ownership could not be proven: "+reason)
}
