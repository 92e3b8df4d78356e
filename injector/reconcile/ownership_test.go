package reconcile

import (
	"context"
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// workload is a Deployment, its current ReplicaSet and a pod of it, linked
// the way the Deployment controller links them.
type workload struct {
	dep *appsv1.Deployment
	rs  *appsv1.ReplicaSet
	pod *corev1.Pod
}

func controllerRef(apiVersion, kind, name string, uid types.UID) []metav1.OwnerReference {
	yes := true
	return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: &yes}}
}

// newWorkload builds name's Deployment in ns; optIn puts the inject label in
// its pod template.
func newWorkload(ns, name string, optIn bool) workload {
	podLabels := map[string]string{"app": name}
	if optIn {
		podLabels[keys.InjectLabel] = keys.EnabledValue
	}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: name + ":1"}}}}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name + "-dep-uid"),
			Annotations: map[string]string{keys.DeploymentRevisionAnnotation: "2"}},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}, Template: tmpl},
	}
	rsTmpl := tmpl.DeepCopy()
	rsTmpl.Labels = map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: "abc"}
	for k, v := range podLabels {
		rsTmpl.Labels[k] = v
	}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-abc", UID: types.UID(name + "-rs-uid"),
			Annotations:     map[string]string{keys.DeploymentRevisionAnnotation: "2"},
			OwnerReferences: controllerRef("apps/v1", "Deployment", dep.Name, dep.UID)},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name, appsv1.DefaultDeploymentUniqueLabelKey: "abc"}},
			Template: *rsTmpl},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-abc-x1", Labels: rsTmpl.Labels,
			OwnerReferences: controllerRef("apps/v1", "ReplicaSet", rs.Name, rs.UID)},
		Spec: tmpl.Spec,
	}
	return workload{dep: dep, rs: rs, pod: pod}
}

func TestOwnerOf(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(w *workload)
		ok     bool
		reason string
		// superseded: only the ReplicaSet's currentness fails.
		superseded bool
	}{
		{name: "proven", ok: true},
		{name: "current by template while the revision annotations lag", ok: true, mutate: func(w *workload) {
			w.rs.Annotations[keys.DeploymentRevisionAnnotation] = "1"
		}},
		{name: "no controller", reason: "not a ReplicaSet", mutate: func(w *workload) { w.pod.OwnerReferences = nil }},
		{name: "controller of another kind", reason: "not a ReplicaSet", mutate: func(w *workload) {
			w.pod.OwnerReferences = controllerRef("apps/v1", "DaemonSet", "x", "u")
		}},
		{name: "a ReplicaSet of another API group", reason: "not a ReplicaSet", mutate: func(w *workload) {
			w.pod.OwnerReferences = controllerRef("example.com/v1", "ReplicaSet", w.rs.Name, w.rs.UID)
		}},
		{name: "ReplicaSet missing", reason: "does not exist", mutate: func(w *workload) { w.rs = nil }},
		{name: "the pod names the ReplicaSet with a made-up UID", reason: "which is not the ReplicaSet of that name", mutate: func(w *workload) {
			w.pod.OwnerReferences[0].UID = "forged"
		}},
		{name: "ReplicaSet in another namespace", reason: "which is not the ReplicaSet of that name", mutate: func(w *workload) { w.rs.Namespace = "other" }},
		{name: "ReplicaSet being deleted", reason: "being deleted", mutate: func(w *workload) { w.rs.DeletionTimestamp = &metav1.Time{} }},
		{name: "the ReplicaSet does not select the pod", reason: "selector does not match", mutate: func(w *workload) {
			w.pod.Labels = map[string]string{keys.InjectLabel: keys.EnabledValue}
		}},
		{name: "the ReplicaSet selects nothing", reason: "selector does not match", mutate: func(w *workload) {
			w.rs.Spec.Selector = &metav1.LabelSelector{}
		}},
		{name: "bare ReplicaSet", reason: "not controlled by a Deployment", mutate: func(w *workload) { w.rs.OwnerReferences = nil }},
		{name: "Deployment missing", reason: "Deployment does not exist", mutate: func(w *workload) { w.dep = nil }},
		{name: "another Deployment of the same name", reason: "Deployment does not exist", mutate: func(w *workload) { w.dep.UID = "recreated" }},
		{name: "Deployment being deleted", reason: "being deleted", mutate: func(w *workload) { w.dep.DeletionTimestamp = &metav1.Time{} }},
		{name: "an older ReplicaSet", reason: "not its Deployment's current ReplicaSet", superseded: true, mutate: func(w *workload) {
			w.rs.Annotations[keys.DeploymentRevisionAnnotation] = "1"
			w.dep.Spec.Template.Spec.Containers[0].Image = "newer:2"
		}},
		{name: "an older ReplicaSet of a Deployment that does not opt in", reason: "does not opt its pods in", mutate: func(w *workload) {
			w.rs.Annotations[keys.DeploymentRevisionAnnotation] = "1"
			w.dep.Spec.Template.Spec.Containers[0].Image = "newer:2"
			delete(w.dep.Spec.Template.Labels, keys.InjectLabel)
		}},
		{name: "the Deployment does not opt in", reason: "does not opt its pods in", mutate: func(w *workload) {
			delete(w.dep.Spec.Template.Labels, keys.InjectLabel)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorkload("argocd", "argocd-repo-server", true)
			if tc.mutate != nil {
				tc.mutate(&w)
			}
			ok, reason, superseded := ownerOf(w.pod, w.rs, w.dep)
			if ok != tc.ok || !strings.Contains(reason, tc.reason) || superseded != tc.superseded {
				t.Fatalf("ownerOf = %v, %q, superseded %v; want %v, %q, superseded %v", ok, reason, superseded, tc.ok, tc.reason, tc.superseded)
			}
			if !ok && strings.Contains(reason, "argocd-repo-server\"") {
				t.Errorf("the reason names the Deployment: %q", reason)
			}
		})
	}
}

func TestStatefulSetOwnerOf(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*appsv1.StatefulSet, *corev1.Pod)
		reason string
	}{
		{name: "proven"},
		{name: "forged UID", reason: "not the StatefulSet of that name", mutate: func(_ *appsv1.StatefulSet, p *corev1.Pod) { p.OwnerReferences[0].UID = "x" }},
		{name: "not selected", reason: "selector does not match", mutate: func(_ *appsv1.StatefulSet, p *corev1.Pod) { p.Labels = nil }},
		{name: "not opted in", reason: "does not opt its pods in", mutate: func(s *appsv1.StatefulSet, _ *corev1.Pod) {
			s.Spec.Template.Labels = map[string]string{"app": "repo"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sts, pod := newSTS()
			if tc.mutate != nil {
				tc.mutate(sts, pod)
			}
			ok, reason := statefulSetOwnerOf(pod, sts)
			if ok != (tc.reason == "") || !strings.Contains(reason, tc.reason) {
				t.Fatalf("statefulSetOwnerOf = %v, %q; want reason %q", ok, reason, tc.reason)
			}
		})
	}
}

// TestProveOwner reads the objects through the API: a pod created by a user
// who may only create pods, claiming victim-db's ReplicaSet, is not proven
// to belong to victim-db; the repo-server's own pod is.
func TestProveOwner(t *testing.T) {
	repo := newWorkload("argocd", "argocd-repo-server", true)
	victim := newWorkload("argocd", "victim-db", false)
	// The attacker's pod: the inject label, and a controller reference
	// copied from one of victim-db's pods, with its labels.
	attacker := victim.pod.DeepCopy()
	attacker.Name = "evil"
	attacker.Labels[keys.InjectLabel] = keys.EnabledValue
	client := fake.NewClientset(repo.dep, repo.rs, victim.dep, victim.rs)
	ctx := context.Background()

	got, err := ProveOwner(ctx, client, repo.pod)
	if err != nil || got.Deployment == nil || got.Ref == nil || got.Ref.Kind != "Deployment" || got.Ref.Name != "argocd-repo-server" || got.Ref.UID != repo.dep.UID {
		t.Fatalf("repo-server pod: %+v, %v", got, err)
	}
	got, err = ProveOwner(ctx, client, attacker)
	if err != nil || got.Ref != nil || got.Deployment != nil || !strings.Contains(got.Reason, "does not opt its pods in") {
		t.Fatalf("attacker's pod: %+v, %v", got, err)
	}
	if strings.Contains(got.Reason, "victim-db\"") || strings.HasPrefix(got.Reason, "victim-db") {
		t.Errorf("the reason names the victim: %q", got.Reason)
	}

	t.Run("a bare pod claims nothing", func(t *testing.T) {
		bare := repo.pod.DeepCopy()
		bare.OwnerReferences = nil
		if got, err := ProveOwner(ctx, client, bare); err != nil || got.Ref != nil || got.Reason != "" {
			t.Fatalf("%+v, %v", got, err)
		}
	})
	t.Run("a ReplicaSet that does not exist", func(t *testing.T) {
		p := repo.pod.DeepCopy()
		p.OwnerReferences[0].Name = "nope"
		if got, err := ProveOwner(ctx, client, p); err != nil || got.Ref != nil || !strings.Contains(got.Reason, "cannot be read") {
			t.Fatalf("%+v, %v", got, err)
		}
	})
	t.Run("no right to read it is a failed proof", func(t *testing.T) {
		c := fake.NewClientset(repo.dep, repo.rs)
		c.PrependReactor("get", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "argocd-repo-server", errors.New("RBAC"))
		})
		if got, err := ProveOwner(ctx, c, repo.pod); err != nil || got.Ref != nil || got.Reason == "" {
			t.Fatalf("%+v, %v", got, err)
		}
	})
	t.Run("an API failure is an error, retried", func(t *testing.T) {
		c := fake.NewClientset(repo.dep, repo.rs)
		c.PrependReactor("get", "replicasets", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewServiceUnavailable("etcd is down")
		})
		if got, err := ProveOwner(ctx, c, repo.pod); err == nil || got.Ref != nil {
			t.Fatalf("%+v, %v", got, err)
		}
	})
	t.Run("StatefulSet", func(t *testing.T) {
		sts, pod := newSTS()
		got, err := ProveOwner(ctx, fake.NewClientset(sts), pod)
		if err != nil || got.Ref == nil || got.Ref.Kind != "StatefulSet" || got.Deployment != nil {
			t.Fatalf("%+v, %v", got, err)
		}
	})
}

// newSTS is an opted-in StatefulSet and a pod it owns.
func newSTS() (*appsv1.StatefulSet, *corev1.Pod) {
	labels := map[string]string{"app": "repo", keys.InjectLabel: keys.EnabledValue}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "repo", UID: "sts-uid"},
		Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "repo"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "repo-0", Labels: labels,
		OwnerReferences: controllerRef("apps/v1", "StatefulSet", "repo", "sts-uid")}}
	return sts, pod
}
