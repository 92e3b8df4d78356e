package reconcile

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// A pod's ownerReferences are written by whoever creates it: an attack run
// created a labelled pod whose controller reference named another team's
// ReplicaSet, made it stale, and with rollout: auto the reconciler restarted
// that team's Deployment (and doctor's hint and the StalePlugins Event named
// it). So the reconciler and doctor name or restart a workload only when the
// cluster confirms, object by object, that it owns the pod and that it is
// one whose pods are injected; the pod's word alone never suffices.

// ownerOf proves that dep owns pod through rs: the pod's controller is rs (by
// name and UID), rs's controller is dep (by name and UID), rs's selector
// matches the pod's labels (a ReplicaSet counts only pods it selects; one that
// merely names it is not its pod), dep's pod template opts in to injection (a
// Deployment that never asked for plugins is never restarted for them), and
// rs is dep's current ReplicaSet (restarting dep for a pod of an older one is
// at best redundant: dep is already rolling). reason says which link failed;
// it names only what the pod itself claims, never a Deployment, so an Event
// on the pod cannot be used to point at someone else's workload. superseded
// says only the last link failed: the chain holds and the Deployment opts in,
// but a rollout has already replaced rs. Every pod of a Deployment looks like
// that just after a restart (the reconciler's own or anyone's) until the
// rollout removes it, so such a pod is no suspect (Owner.Superseded).
func ownerOf(pod *corev1.Pod, rs *appsv1.ReplicaSet, dep *appsv1.Deployment) (ok bool, reason string, superseded bool) {
	if pod == nil {
		return false, "no pod", false
	}
	ref := metav1.GetControllerOf(pod)
	switch {
	case ref == nil || ref.Kind != "ReplicaSet" || groupOf(ref.APIVersion) != appsv1.GroupName:
		return false, "the pod's controller is not a ReplicaSet", false
	case rs == nil:
		return false, fmt.Sprintf("its controller, ReplicaSet %s, does not exist", ref.Name), false
	case rs.Namespace != pod.Namespace || rs.Name != ref.Name || rs.UID != ref.UID:
		return false, fmt.Sprintf("its controller reference names ReplicaSet %s with UID %s, which is not the ReplicaSet of that name", ref.Name, ref.UID), false
	case rs.DeletionTimestamp != nil:
		return false, fmt.Sprintf("ReplicaSet %s is being deleted", rs.Name), false
	}
	sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
		return false, fmt.Sprintf("ReplicaSet %s's selector does not match the pod's labels", rs.Name), false
	}
	depRef := metav1.GetControllerOf(rs)
	switch {
	case depRef == nil || depRef.Kind != "Deployment" || groupOf(depRef.APIVersion) != appsv1.GroupName:
		return false, fmt.Sprintf("ReplicaSet %s is not controlled by a Deployment", rs.Name), false
	case dep == nil || dep.Namespace != rs.Namespace || dep.Name != depRef.Name || dep.UID != depRef.UID:
		return false, fmt.Sprintf("ReplicaSet %s's Deployment does not exist (not with the UID the ReplicaSet names)", rs.Name), false
	case dep.DeletionTimestamp != nil:
		return false, fmt.Sprintf("ReplicaSet %s's Deployment is being deleted", rs.Name), false
	case dep.Spec.Template.Labels[keys.InjectLabel] != keys.EnabledValue:
		return false, fmt.Sprintf("ReplicaSet %s's Deployment does not opt its pods in (no %s=%s in its pod template)", rs.Name, keys.InjectLabel, keys.EnabledValue), false
	case !currentReplicaSet(rs, dep):
		return false, fmt.Sprintf("ReplicaSet %s is not its Deployment's current ReplicaSet (a rollout replaces its pods already)", rs.Name), true
	}
	return true, "", false
}

// currentReplicaSet: the Deployment controller gives its newest ReplicaSet
// the Deployment's revision; until it has, the newest one is the ReplicaSet
// whose template is the Deployment's (plus the pod-template-hash label the
// controller adds), which is how the controller itself finds it.
func currentReplicaSet(rs *appsv1.ReplicaSet, dep *appsv1.Deployment) bool {
	if rev := dep.Annotations[keys.DeploymentRevisionAnnotation]; rev != "" && rev == rs.Annotations[keys.DeploymentRevisionAnnotation] {
		return true
	}
	t := rs.Spec.Template.DeepCopy()
	delete(t.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	want := dep.Spec.Template.DeepCopy()
	delete(want.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	if len(t.Labels) == 0 && len(want.Labels) == 0 {
		t.Labels, want.Labels = nil, nil
	}
	return equality.Semantic.DeepEqual(t, want)
}

// statefulSetOwnerOf proves that sts owns pod: the pod's controller is sts
// (by name and UID), sts's selector matches the pod's labels, and its pod
// template opts in to injection.
func statefulSetOwnerOf(pod *corev1.Pod, sts *appsv1.StatefulSet) (ok bool, reason string) {
	if pod == nil {
		return false, "no pod"
	}
	ref := metav1.GetControllerOf(pod)
	switch {
	case ref == nil || ref.Kind != "StatefulSet" || groupOf(ref.APIVersion) != appsv1.GroupName:
		return false, "the pod's controller is not a StatefulSet"
	case sts == nil:
		return false, fmt.Sprintf("its controller, StatefulSet %s, does not exist", ref.Name)
	case sts.Namespace != pod.Namespace || sts.Name != ref.Name || sts.UID != ref.UID:
		return false, fmt.Sprintf("its controller reference names StatefulSet %s with UID %s, which is not the StatefulSet of that name", ref.Name, ref.UID)
	case sts.DeletionTimestamp != nil:
		return false, fmt.Sprintf("StatefulSet %s is being deleted", sts.Name)
	}
	sel, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
		return false, fmt.Sprintf("StatefulSet %s's selector does not match the pod's labels", sts.Name)
	}
	if sts.Spec.Template.Labels[keys.InjectLabel] != keys.EnabledValue {
		return false, fmt.Sprintf("StatefulSet %s does not opt its pods in (no %s=%s in its pod template)", sts.Name, keys.InjectLabel, keys.EnabledValue)
	}
	return true, ""
}

func groupOf(apiVersion string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return ""
	}
	return gv.Group
}

// Owner is what the cluster confirms about a pod's owner.
type Owner struct {
	// Ref is the proven workload, for Events and hints; nil when none is.
	Ref *corev1.ObjectReference
	// Deployment is the proven Deployment, for a rollout.
	Deployment *appsv1.Deployment
	// Reason says why no owner is proven; "" when one is or the pod claims
	// none (a bare pod).
	Reason string
	// Superseded: every link is proven and the Deployment opts in, but the
	// pod's ReplicaSet is an old one: a rollout is already replacing the pod.
	Superseded bool
}

// ProveOwner reads what a pod's controller reference points at (a
// ReplicaSet and its Deployment, or a StatefulSet) and proves it with ownerOf
// or statefulSetOwnerOf. An object that does not exist or may not be read is
// a reason, not an error: the proof fails, there is nothing to retry. err is
// for the API failing (retry later).
func ProveOwner(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod) (Owner, error) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return Owner{}, nil
	}
	missing := func(err error) bool { return apierrors.IsNotFound(err) || apierrors.IsForbidden(err) }
	switch ref.Kind {
	case "ReplicaSet":
		rs, err := client.AppsV1().ReplicaSets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case missing(err):
			return Owner{Reason: fmt.Sprintf("its controller, ReplicaSet %s, cannot be read: %v", ref.Name, err)}, nil
		case err != nil:
			return Owner{}, fmt.Errorf("reading ReplicaSet %s: %w", ref.Name, err)
		}
		var dep *appsv1.Deployment
		if depRef := metav1.GetControllerOf(rs); depRef != nil && depRef.Kind == "Deployment" && rs.UID == ref.UID {
			dep, err = client.AppsV1().Deployments(pod.Namespace).Get(ctx, depRef.Name, metav1.GetOptions{})
			switch {
			case missing(err):
				dep = nil
			case err != nil:
				return Owner{}, fmt.Errorf("reading ReplicaSet %s's Deployment: %w", ref.Name, err)
			}
		}
		if ok, reason, superseded := ownerOf(pod, rs, dep); !ok {
			return Owner{Reason: reason, Superseded: superseded}, nil
		}
		return Owner{Deployment: dep, Ref: &corev1.ObjectReference{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "Deployment",
			Namespace: dep.Namespace, Name: dep.Name, UID: dep.UID, ResourceVersion: dep.ResourceVersion}}, nil
	case "StatefulSet":
		sts, err := client.AppsV1().StatefulSets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case missing(err):
			return Owner{Reason: fmt.Sprintf("its controller, StatefulSet %s, cannot be read: %v", ref.Name, err)}, nil
		case err != nil:
			return Owner{}, fmt.Errorf("reading StatefulSet %s: %w", ref.Name, err)
		}
		if ok, reason := statefulSetOwnerOf(pod, sts); !ok {
			return Owner{Reason: reason}, nil
		}
		return Owner{Ref: &corev1.ObjectReference{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "StatefulSet",
			Namespace: sts.Namespace, Name: sts.Name, UID: sts.UID, ResourceVersion: sts.ResourceVersion}}, nil
	default:
		return Owner{Reason: fmt.Sprintf("its controller is a %s, which cmp-injector does not restart", ref.Kind)}, nil
	}
}
