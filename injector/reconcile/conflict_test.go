package reconcile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

func TestConflictBackoff(t *testing.T) {
	c := newConflicts(10*time.Second, 40*time.Second)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for i, step := range []struct {
		at      int
		wait    time.Duration
		started bool
	}{
		{0, 10 * time.Second, true},  // another release's mark: leave the pod to it
		{4, 6 * time.Second, false},  // the pod changed meanwhile: still waiting, reported once
		{10, 0, false},               // waited: take the pod back
		{11, 20 * time.Second, true}, // the other release took it again: twice as long
		{31, 0, false},
		{32, 40 * time.Second, true},
		{72, 0, false},
		{73, 40 * time.Second, true}, // at most the cap
	} {
		wait, started := c.hold("argocd/repo", at(step.at))
		if wait != step.wait || started != step.started {
			t.Fatalf("step %d (t=%ds): wait %s, started %v; want %s, %v", i, step.at, wait, started, step.wait, step.started)
		}
	}
	if wait, _ := c.hold("argocd/other", at(80)); wait != 10*time.Second {
		t.Errorf("another pod starts at the base: %s", wait)
	}
	c.forget("argocd/repo")
	if wait, started := c.hold("argocd/repo", at(200)); wait != 10*time.Second || !started {
		t.Errorf("a forgotten pod starts afresh: %s, %v", wait, started)
	}
	c.forgetNamespace("argocd")
	if len(c.pods) != 0 {
		t.Errorf("pods left after forgetNamespace: %v", c.pods)
	}
}

// TestReleasesDoNotFight: two releases (different Leases) with different
// catalogs look after one pod. The attack run saw them rewrite each other's
// patches 104 times in 20 s. Here each reconciles the pod in turn, ten times,
// each time once its cache holds the pod as stored: release b brings the pod
// to its catalog once; release a finds b's mark on a pod it would change and
// backs off with one Warning Event instead of patching it back. When a's wait
// is over it takes the pod back, and b then backs off in turn.
func TestReleasesDoNotFight(t *testing.T) {
	pod := repoPod(t, "argocd", "repo-1", catR1(t))
	client := fake.NewClientset(namespace("argocd", true), pod)
	count := countPatches(client)
	a := newTestReconciler(t, client, "release-a", catR1(t), RolloutOff)
	b := newTestReconciler(t, client, "release-b", catR2(t), RolloutOff)
	ctx := context.Background()
	for _, r := range []*testReconciler{a, b} {
		// No worker: the test runs reconcile itself.
		_, end, ok := r.startTerm(ctx)
		if !ok {
			t.Fatal("no term")
		}
		t.Cleanup(end)
		// Longer than the test: a wait never ends by itself here.
		r.conflicts = newConflicts(time.Hour, time.Hour)
	}
	const key = "argocd/repo-1"
	turn := func(r *testReconciler) error {
		t.Helper()
		stored := getPod(t, client, "argocd", "repo-1")
		eventually(t, "the cache holding the pod as stored", func() (bool, string) {
			p, ok := r.scopeNow().get("argocd", "repo-1")
			return ok && maps.Equal(p.Annotations, keptAnnotations(stored.Annotations)), "stale cache"
		})
		return r.reconcile(ctx, key)
	}
	var backoffs int
	for range 10 {
		for _, r := range []*testReconciler{a, b} {
			err := turn(r)
			var wait *backoffError
			switch {
			case errors.As(err, &wait):
				backoffs++
			case err != nil:
				t.Fatal(err)
			}
		}
	}
	if n := count.of("pods", "repo-1"); n != 1 {
		t.Errorf("%d patches of the pod in 10 rounds, want 1 (b's)", n)
	}
	if got := getPod(t, client, "argocd", "repo-1").Annotations[keys.ReconcilerAnnotation]; got != "cmp-injector/release-b" {
		t.Errorf("mark %q", got)
	}
	if got := a.metric(t, "cmp_injector_reconcile_conflicts_total"); got != 1 || backoffs != 9 {
		t.Errorf("a: %v conflicts, %d back-offs; want 1 reported, 9 back-offs", got, backoffs)
	}
	eventually(t, "one ReconcilerConflict Event", func() (bool, string) {
		evs := events(t, client, "argocd", "Pod", "repo-1")
		n := 0
		for _, e := range evs {
			if e.Reason == eventConflict && strings.Contains(e.Message, "cmp-injector/release-b") {
				n += int(e.Count)
			}
		}
		return n == 1, fmt.Sprintf("%d:\n%s", n, eventReasons(evs))
	})

	// a's wait ends: it takes the pod back, once; b now backs off.
	a.conflicts.pods[key].until = time.Time{}
	if err := turn(a); err != nil {
		t.Fatal(err)
	}
	if err := turn(b); !errors.As(err, new(*backoffError)) {
		t.Fatalf("b after a took the pod back: %v", err)
	}
	for range 5 {
		for _, r := range []*testReconciler{a, b} {
			if err := turn(r); err != nil && !errors.As(err, new(*backoffError)) {
				t.Fatal(err)
			}
		}
	}
	p := getPod(t, client, "argocd", "repo-1")
	if n := count.of("pods", "repo-1"); n != 2 || p.Annotations[keys.ReconcilerAnnotation] != "cmp-injector/release-a" ||
		!strings.Contains(p.Annotations[keys.StatusAnnotation], `"revision":"r1"`) {
		t.Errorf("%d patches, mark %q, status %s", n, p.Annotations[keys.ReconcilerAnnotation], p.Annotations[keys.StatusAnnotation])
	}
	if got := b.metric(t, "cmp_injector_reconcile_conflicts_total"); got != 1 {
		t.Errorf("b: %v conflicts, want 1", got)
	}
}
