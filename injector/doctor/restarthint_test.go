package doctor

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// TestRestartHint: the hint restarts a workload only when the cluster proves
// it owns the pod; a pod of a ReplicaSet its opted-in Deployment has already
// replaced is told to wait for that rollout, and a pod whose claimed owner
// does not opt in is told to go, with the reason.
func TestRestartHint(t *testing.T) {
	yes := true
	ref := func(kind, name string, uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: &yes}}
	}
	build := func(optIn bool, depRevision string) (*appsv1.Deployment, *appsv1.ReplicaSet, *corev1.Pod) {
		labels := map[string]string{"app": "repo"}
		if optIn {
			labels[keys.InjectLabel] = keys.EnabledValue
		}
		tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "repo", Image: "repo:1"}}}}
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "repo", UID: "dep-uid",
			Annotations: map[string]string{keys.DeploymentRevisionAnnotation: depRevision}},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "repo"}}, Template: tmpl}}
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "repo-abc", UID: "rs-uid",
			Annotations: map[string]string{keys.DeploymentRevisionAnnotation: "1"}, OwnerReferences: ref("Deployment", "repo", "dep-uid")},
			Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "repo"}}, Template: tmpl}}
		if depRevision != "1" {
			// The Deployment's template moved on: rs is an old ReplicaSet.
			dep.Spec.Template.Annotations = map[string]string{keys.RestartedAtAnnotation: "2026-11-26T00:00:00Z"}
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "repo-abc-x1", Labels: labels,
			OwnerReferences: ref("ReplicaSet", "repo-abc", "rs-uid")}}
		return dep, rs, pod
	}
	for _, tc := range []struct {
		name         string
		optIn        bool
		depRevision  string
		want, reject string
	}{
		{name: "proven", optIn: true, depRevision: "1", want: "rollout restart deployment/repo"},
		{name: "an old ReplicaSet of a rollout", optIn: true, depRevision: "2", want: "wait: a rollout is replacing it", reject: "rollout restart"},
		{name: "not opted in", depRevision: "1", want: "delete pod repo-abc-x1 (its owner is not proven", reject: "rollout restart"},
		{name: "an old ReplicaSet, not opted in", depRevision: "2", want: "does not opt its pods in", reject: "wait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dep, rs, pod := build(tc.optIn, tc.depRevision)
			d := &doctor{client: fake.NewClientset(dep, rs, pod)}
			hint := d.restartHint(context.Background(), pod)
			if !strings.Contains(hint, tc.want) || (tc.reject != "" && strings.Contains(hint, tc.reject)) {
				t.Errorf("hint %q; want %q, without %q", hint, tc.want, tc.reject)
			}
		})
	}
}
