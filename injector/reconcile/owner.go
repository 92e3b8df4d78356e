package reconcile

import (
	"context"
	"encoding/json"
	"fmt"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// rollout restarts the Deployment owning a stale pod when the admin chose
// rollout: auto, by writing the catalog revision into its pod template's
// annotations (what `kubectl rollout restart` does with a timestamp). The
// value makes it idempotent: every stale pod of the Deployment asks for the
// same restart, and a restart already asked for is not asked again. The
// Deployment must be proven to own the pod (ProveOwner); otherwise nothing
// is restarted and the pod, not any workload, gets a Warning Event.
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
	if dep.Spec.Template.Annotations[keys.RolloutAnnotation] == cat.Revision {
		return nil
	}
	body, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{keys.RolloutAnnotation: cat.Revision}}}}})
	if _, err := r.opts.Client.AppsV1().Deployments(pod.Namespace).Patch(ctx, dep.Name, types.StrategicMergePatchType, body,
		metav1.PatchOptions{FieldManager: "cmp-injector"}); err != nil {
		return fmt.Errorf("restarting Deployment %s: %w", dep.Name, err)
	}
	r.metrics.rollouts.Inc()
	r.log.Info("rolled out stale pods", zap.String("deployment", pod.Namespace+"/"+dep.Name), zap.String("revision", cat.Revision))
	r.recorder.Event(owner.Ref, corev1.EventTypeNormal, EventRollout, fmt.Sprintf(
		"restarting to apply catalog revision %s (rollout: auto): %s", cat.Revision, d.StaleMessage()))
	return nil
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
