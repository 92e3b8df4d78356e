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

// owner is what an admin restarts: the Deployment of the pod's ReplicaSet,
// else the pod's own controller (a StatefulSet, a bare ReplicaSet), else nil.
func (r *Reconciler) owner(ctx context.Context, pod *corev1.Pod) *corev1.ObjectReference {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return nil
	}
	out := &corev1.ObjectReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID, Namespace: pod.Namespace}
	if ref.Kind != "ReplicaSet" {
		return out
	}
	rs, err := r.opts.Client.AppsV1().ReplicaSets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		r.log.Warn("cannot read the pod's ReplicaSet; reporting on it instead of its Deployment", zap.String("replicaSet", ref.Name), zap.Error(err))
		return out
	}
	if dep := metav1.GetControllerOf(rs); dep != nil && dep.Kind == "Deployment" {
		return &corev1.ObjectReference{APIVersion: dep.APIVersion, Kind: dep.Kind, Name: dep.Name, UID: dep.UID, Namespace: pod.Namespace}
	}
	return out
}

// rollout restarts the Deployment owning a stale pod when the admin chose
// rollout: auto, by writing the catalog revision into its pod template's
// annotations (what `kubectl rollout restart` does with a timestamp). The
// value makes it idempotent: every stale pod of the Deployment asks for the
// same restart, and a restart already asked for is not asked again.
func (r *Reconciler) rollout(ctx context.Context, pod *corev1.Pod, d *inject.Drift, cat *catalog.Catalog) error {
	if r.opts.Rollout != RolloutAuto || len(d.Stale) == 0 {
		return nil
	}
	owner := r.owner(ctx, pod)
	if owner == nil || owner.Kind != "Deployment" {
		return nil
	}
	dep, err := r.opts.Client.AppsV1().Deployments(pod.Namespace).Get(ctx, owner.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading Deployment %s for the rollout: %w", owner.Name, err)
	}
	if dep.Spec.Template.Annotations[keys.RolloutAnnotation] == cat.Revision {
		return nil
	}
	body, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{keys.RolloutAnnotation: cat.Revision}}}}})
	if _, err := r.opts.Client.AppsV1().Deployments(pod.Namespace).Patch(ctx, owner.Name, types.StrategicMergePatchType, body,
		metav1.PatchOptions{FieldManager: "cmp-injector"}); err != nil {
		return fmt.Errorf("restarting Deployment %s: %w", owner.Name, err)
	}
	r.metrics.rollouts.Inc()
	r.log.Info("rolled out stale pods", zap.String("deployment", pod.Namespace+"/"+owner.Name), zap.String("revision", cat.Revision))
	r.recorder.Event(owner, corev1.EventTypeNormal, EventRollout, fmt.Sprintf(
		"restarting to apply catalog revision %s (rollout: auto): %s", cat.Revision, d.StaleMessage()))
	return nil
}
