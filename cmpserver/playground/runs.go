package playground

import (
	"context"
	"errors"
	"sync"
)

// errSuperseded is the cause of a run cancelled because a newer one started.
var errSuperseded = errors.New("a newer run started")

// runs tracks the run in progress per (session, kind), so that a newer run of
// the same kind from the same page cancels the older one: an author typing
// quickly must not queue a render per keystroke, and a stale result must never
// replace a fresh one on the page.
type runs struct {
	mu     sync.Mutex
	seq    uint64
	active map[runKey]*activeRun
}

type runKey struct{ session, kind string }

type activeRun struct {
	id     uint64
	cancel context.CancelCauseFunc
}

// start registers a run and cancels the previous one of the same key. done
// must be called when the run ends.
func (r *runs) start(parent context.Context, session, kind string) (ctx context.Context, done func()) {
	ctx, cancel := context.WithCancelCause(parent)
	key := runKey{session, kind}
	r.mu.Lock()
	if r.active == nil {
		r.active = map[runKey]*activeRun{}
	}
	if prev := r.active[key]; prev != nil {
		prev.cancel(errSuperseded)
	}
	r.seq++
	me := &activeRun{id: r.seq, cancel: cancel}
	r.active[key] = me
	r.mu.Unlock()
	return ctx, func() {
		r.mu.Lock()
		if r.active[key] == me {
			delete(r.active, key)
		}
		r.mu.Unlock()
		cancel(nil)
	}
}

// cancelAll stops every run, at shutdown.
func (r *runs) cancelAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.active {
		a.cancel(context.Canceled)
	}
}
