package reconcile

import (
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// Two releases of cmp-injector (two Helm releases, each with its own Lease
// and catalog) whose namespace selectors overlap both look after the same
// pods. Each leader saw the other's patch as drift from its own catalog and
// patched it back at once: an attack run counted 104 patches of one pod in
// 20 s, each one re-projected into the running sidecars. A Lease cannot help
// (they hold different ones), and which catalog is right is the admin's
// call, not ours. So each patch carries the writer's release
// (keys.ReconcilerAnnotation), and a reconciler that finds another release's
// mark on a pod it would change backs off instead: it leaves the pod alone
// for a while, says so with a Warning Event on the pod and a metric, and only
// then takes the pod back. The other release, if it still runs, then finds
// this one's mark and backs off in turn, each for twice as long as its last
// time, so two live releases settle to a patch every so often (at most one per
// maxConflictBackoff each) instead of a storm, and a release that was
// uninstalled leaves its pods to the other after one short wait.
//
// The mark is the pod's own say-so and anyone who may patch the pod may
// write it, but all it can do is make the reconciler wait before updating
// that pod: it never makes it act.

// Backoff bounds between releases.
const (
	defaultConflictBackoff = 10 * time.Second
	maxConflictBackoff     = 30 * time.Minute
)

// eventConflict is the reason of the Warning Event on a pod another release
// patched.
const eventConflict = "ReconcilerConflict"

// otherWriter is the release named by the pod's mark when it is not self;
// "" when the pod is unmarked (only the webhook wrote it) or marked by self.
func otherWriter(pod *corev1.Pod, self string) string {
	if w := pod.Annotations[keys.ReconcilerAnnotation]; w != "" && w != self {
		return w
	}
	return ""
}

// conflicts is the per-pod backoff from other releases.
type conflicts struct {
	base, max time.Duration
	mu        sync.Mutex
	pods      map[string]*podConflict
}

type podConflict struct {
	// rounds is how many times this pod was left to another release.
	rounds int
	// until is when this replica may take the pod back.
	until time.Time
	// spent: the pod was taken back after the last wait; finding another
	// mark again starts a longer wait.
	spent bool
}

func newConflicts(base, max time.Duration) *conflicts {
	return &conflicts{base: base, max: max, pods: map[string]*podConflict{}}
}

// hold is asked when pod key, which this replica would patch, carries
// another release's mark. It returns how long to leave the pod alone (0:
// take it back now), and started is true when that wait begins now (report
// it once, not on every event of the pod meanwhile).
func (c *conflicts) hold(key string, now time.Time) (wait time.Duration, started bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pods[key]
	switch {
	case p != nil && now.Before(p.until):
		return p.until.Sub(now), false
	case p != nil && !p.spent:
		p.spent = true
		return 0, false
	case p == nil:
		p = &podConflict{}
		c.pods[key] = p
	}
	d := c.base << p.rounds
	if d > c.max || d <= 0 {
		d = c.max
	}
	p.rounds++
	p.until, p.spent = now.Add(d), false
	return d, true
}

// forget drops a pod that is gone.
func (c *conflicts) forget(key string) {
	c.mu.Lock()
	delete(c.pods, key)
	c.mu.Unlock()
}

// forgetNamespace drops the pods of a namespace no longer looked after.
func (c *conflicts) forgetNamespace(ns string) {
	c.mu.Lock()
	for key := range c.pods {
		if inNamespace(key, ns) {
			delete(c.pods, key)
		}
	}
	c.mu.Unlock()
}

// reset forgets every pod: a new term starts afresh.
func (c *conflicts) reset() {
	c.mu.Lock()
	c.pods = map[string]*podConflict{}
	c.mu.Unlock()
}

// backoffError asks the worker to look at the pod again after a while,
// without counting it as a failure.
type backoffError struct{ after time.Duration }

func (e *backoffError) Error() string {
	return fmt.Sprintf("another release's reconciler patched this pod; looking again in %s", e.after)
}
