package reconcile

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

const self = "cmp-injector/release-a"

var planNow = time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC)

// staleRecorded is pod with the status the reconciler writes for it under
// cat: its stale list already recorded, so it is not reported again.
func staleRecorded(t *testing.T, pod *corev1.Pod, cat *catalog.Catalog) *corev1.Pod {
	t.Helper()
	d, err := inject.CheckDrift(pod, cat)
	if err != nil || len(d.Stale) == 0 {
		t.Fatalf("not stale: %+v %v", d, err)
	}
	out := pod.DeepCopy()
	out.Annotations[keys.StatusAnnotation] = d.Status.JSON()
	return out
}

func depOwner(w workload) Owner {
	return Owner{Deployment: w.dep, Ref: &corev1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment",
		Namespace: w.dep.Namespace, Name: w.dep.Name, UID: w.dep.UID}}
}

// TestPlan: what the reconciler decides for each kind of pod, catalog,
// owner and memory, as the steps it would take.
func TestPlan(t *testing.T) {
	r1, r2, r3 := catR1(t), catR2(t), catR3(t)
	repo := newWorkload("argocd", "argocd-repo-server", true)
	owned := injectedPod(t, repo.pod, r1)
	bare := repoPod(t, "argocd", "repo-1", r1)
	deleting := bare.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: planNow}
	unreadable := bare.DeepCopy()
	unreadable.Annotations[keys.StatusAnnotation] = "{"
	markedByB := bare.DeepCopy()
	markedByB.Annotations[keys.ReconcilerAnnotation] = "cmp-injector/release-b"
	ownedRecorded := staleRecorded(t, owned, r3)
	ownedRecordedByB := ownedRecorded.DeepCopy()
	ownedRecordedByB.Annotations[keys.ReconcilerAnnotation] = "cmp-injector/release-b"
	rolledAlready := depOwner(repo)
	rolledAlready.Deployment = repo.dep.DeepCopy()
	rolledAlready.Deployment.Annotations[keys.RolloutAnnotation] = "r3"
	apiDown := errors.New("etcd is down")

	staleEvent := "event Pod/%s Warning StalePlugins: not current with catalog revision r3 until restarted: plugin helm: runs image alpine/helm:3.16.2, the catalog says alpine/helm:3.17.0"
	for name, tc := range map[string]struct {
		pod     *corev1.Pod
		cat     *catalog.Catalog
		rollout string
		edit    func(*planInput)
		// want are the steps' lines, each matched as a prefix.
		want     []string
		forget   bool
		idle     bool
		stale    int
		conflict string
		retry    bool
	}{
		"a pod the webhook did not inject": {pod: repo.pod, cat: r1, forget: true},
		"a pod being deleted":              {pod: deleting, cat: r1, forget: true},
		"no catalog yet":                   {pod: bare, idle: true},
		"an unreadable status":             {pod: unreadable, cat: r1, want: []string{"log warn: injected pod has an unreadable status"}},
		"a current pod":                    {pod: bare, cat: r1},
		"a live config change": {pod: bare, cat: r2, want: []string{
			"patch pod " + keys.ReconcilerAnnotation + "," + keys.StatusAnnotation + "," + keys.ConfigAnnotationPrefix + "helm",
			"log info: plugin config updated live",
			"event Pod/repo-1 Normal PluginConfigUpdated: catalog revision r2: plugin.yaml updated ([" + keys.ConfigAnnotationPrefix + "helm])"}},
		"a bare pod turns stale (rollout off)": {pod: bare, cat: r3, stale: 1, want: []string{
			"patch pod " + keys.ReconcilerAnnotation + "," + keys.StatusAnnotation,
			"log warn: injected pod is stale",
			strings.Replace(staleEvent, "%s", "repo-1", 1)}},
		"a bare pod turns stale (rollout auto): nothing to restart": {pod: bare, cat: r3, rollout: RolloutAuto, stale: 1, want: []string{
			"patch pod", "log warn: injected pod is stale", "event Pod/repo-1 Warning StalePlugins"}},
		"an owned pod turns stale: its proven Deployment hears of it": {pod: owned, cat: r3, stale: 1,
			edit: func(in *planInput) { in.Owner = depOwner(repo) },
			want: []string{"patch pod", "log warn: injected pod is stale", strings.Replace(staleEvent, "%s", owned.Name, 1),
				"event Deployment/argocd-repo-server Warning StalePlugins: pod " + owned.Name + " is not current"}},
		"an owned pod turns stale, its owner unreadable": {pod: owned, cat: r3, stale: 1,
			edit: func(in *planInput) { in.OwnerErr = apiDown },
			want: []string{"patch pod", "log warn: injected pod is stale", "event Pod/", "log warn: cannot read the stale pod's owner"}},
		"an owned pod turns stale, its owner unproven": {pod: owned, cat: r3, stale: 1,
			edit: func(in *planInput) { in.Owner = Owner{Reason: "no such ReplicaSet"} },
			want: []string{"patch pod", "log warn: injected pod is stale", "event Pod/", "log info: the stale pod's owner is not proven"}},
		"stale already reported (rollout off)": {pod: ownedRecorded, cat: r3, stale: 1,
			edit: func(in *planInput) { in.Owner = depOwner(repo) }},
		"stale, rollout auto: the proven Deployment restarts": {pod: ownedRecorded, cat: r3, rollout: RolloutAuto, stale: 1,
			edit: func(in *planInput) { in.Owner = depOwner(repo) },
			want: []string{"restart Deployment argocd-repo-server for r3", "log info: rolled out stale pods",
				"event Deployment/argocd-repo-server Normal PluginRollout: restarting to apply catalog revision r3 (rollout: auto): plugin helm: runs image alpine/helm:3.16.2"}},
		"the Deployment carries the revision already": {pod: ownedRecorded, cat: r3, rollout: RolloutAuto, stale: 1,
			edit: func(in *planInput) { in.Owner = rolledAlready }},
		"this replica restarted it for the revision (an operator stripped the mark)": {pod: ownedRecorded, cat: r3, rollout: RolloutAuto, stale: 1,
			edit: func(in *planInput) { in.Owner, in.RolledFor = depOwner(repo), "r3" }},
		"owner unproven: the pod hears of it, nothing restarts": {pod: ownedRecorded, cat: r3, rollout: RolloutAuto, stale: 1,
			edit: func(in *planInput) { in.Owner = Owner{Reason: "ReplicaSet x's Deployment does not opt its pods in"} },
			want: []string{"remember unproven: ReplicaSet x's Deployment does not opt its pods in", "log warn: stale pod: its owner could not be proven",
				"event Pod/" + owned.Name + " Warning OwnerUnproven: stale, but not restarted (rollout: auto): ownership could not be proven: ReplicaSet x's"}},
		"owner unproven, reported before for that reason": {pod: ownedRecorded, cat: r3, rollout: RolloutAuto, stale: 1,
			edit: func(in *planInput) { in.Owner, in.Unproven = Owner{Reason: "gone"}, "gone" }},
		"a pod of a ReplicaSet its rollout replaces: no restart, no Warning": {pod: ownedRecorded, cat: r3, rollout: RolloutAuto, stale: 1,
			edit: func(in *planInput) {
				in.Owner = Owner{Reason: "ReplicaSet x is not its Deployment's current ReplicaSet", Superseded: true}
			}},
		"a proven StatefulSet is not restarted": {pod: ownedRecorded, cat: r3, rollout: RolloutAuto, stale: 1,
			edit: func(in *planInput) { in.Owner = Owner{Ref: &corev1.ObjectReference{Kind: "StatefulSet", Name: "repo"}} },
			want: []string{"remember unproven: its owner is not a Deployment", "log warn", "event Pod/"}},
		"rollout auto, owner unreadable: retried": {pod: ownedRecorded, cat: r3, rollout: RolloutAuto, stale: 1, retry: true,
			edit: func(in *planInput) { in.OwnerErr = apiDown }},
		"another release's mark on a pod this one would patch": {pod: markedByB, cat: r2, conflict: "cmp-injector/release-b",
			want: []string{"patch pod " + keys.ReconcilerAnnotation + "," + keys.StatusAnnotation + "," + keys.ConfigAnnotationPrefix + "helm", "log info", "event Pod/repo-1 Normal PluginConfigUpdated"}},
		"another release's mark on a current pod": {pod: markedByB, cat: r1},
		"another release's mark, rollout auto, nothing to patch: taken back with the mark only": {pod: ownedRecordedByB, cat: r3,
			rollout: RolloutAuto, stale: 1, conflict: "cmp-injector/release-b",
			edit: func(in *planInput) { in.Owner = depOwner(repo) },
			want: []string{"patch pod " + keys.ReconcilerAnnotation, "restart Deployment argocd-repo-server for r3", "log info", "event Deployment/"}},
	} {
		t.Run(name, func(t *testing.T) {
			rollout := tc.rollout
			if rollout == "" {
				rollout = RolloutOff
			}
			before := tc.pod.DeepCopy()
			in := newInput(tc.pod, tc.cat, self, rollout, planNow)
			if tc.edit != nil {
				tc.edit(&in)
			}
			p := plan(in)
			if again := plan(in); !reflect.DeepEqual(p, again) {
				t.Errorf("the same input planned twice differs:\n%v\n%v", p.Steps, again.Steps)
			}
			if !reflect.DeepEqual(before, tc.pod) {
				t.Error("plan changed the pod")
			}
			if p.Forget != tc.forget || p.Idle != tc.idle || len(p.Stale) != tc.stale || p.Conflict != tc.conflict || (p.Retry != nil) != tc.retry {
				t.Errorf("forget %v idle %v stale %d conflict %q retry %v", p.Forget, p.Idle, len(p.Stale), p.Conflict, p.Retry)
			}
			var got []string
			for _, s := range p.Steps {
				got = append(got, s.String())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("steps:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("step %d:\n%s\nwant a line starting\n%s", i, got[i], tc.want[i])
				}
			}
			for _, s := range p.Steps {
				if s.PatchPod != nil && s.PatchPod[keys.ReconcilerAnnotation] != self {
					t.Errorf("a pod patch without this release's mark: %v", s.PatchPod)
				}
				if s.Restart != nil && !strings.Contains(string(s.Restart.Body), planNow.Format(time.RFC3339)) {
					t.Errorf("restart body %s", s.Restart.Body)
				}
			}
		})
	}
}

// TestOwnerWanted: the owner is read only when a step needs it.
func TestOwnerWanted(t *testing.T) {
	r1, r3 := catR1(t), catR3(t)
	repo := newWorkload("argocd", "argocd-repo-server", true)
	owned := injectedPod(t, repo.pod, r1)
	recorded := staleRecorded(t, owned, r3)
	for name, tc := range map[string]struct {
		pod     *corev1.Pod
		cat     *catalog.Catalog
		rollout string
		want    bool
	}{
		"current":                         {owned, r1, RolloutAuto, false},
		"a bare stale pod":                {repoPod(t, "argocd", "repo-1", r1), r3, RolloutAuto, false},
		"turns stale, rollout off":        {owned, r3, RolloutOff, true},
		"stale as recorded, rollout off":  {recorded, r3, RolloutOff, false},
		"stale as recorded, rollout auto": {recorded, r3, RolloutAuto, true},
		"not injected":                    {repo.pod, r3, RolloutAuto, false},
		"no catalog":                      {owned, nil, RolloutAuto, false},
	} {
		if got := ownerWanted(newInput(tc.pod, tc.cat, self, tc.rollout, planNow)); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}

// TestConflictSteps: the Warning names the other release and the wait.
func TestConflictSteps(t *testing.T) {
	pod := repoPod(t, "argocd", "repo-1", catR1(t))
	steps := conflictSteps(pod, "cmp-injector/release-b", self, "r1", 20*time.Second)
	if len(steps) != 2 || steps[0].Log == nil || !steps[0].Log.Warn || steps[1].Event == nil {
		t.Fatalf("%v", steps)
	}
	if msg := steps[1].String(); !strings.Contains(msg, "ReconcilerConflict: last patched by the reconciler of release cmp-injector/release-b") ||
		!strings.Contains(msg, "for 20s") {
		t.Errorf("%s", msg)
	}
	if s := (step{}).String(); s != "nothing" {
		t.Errorf("empty step: %s", s)
	}
}
