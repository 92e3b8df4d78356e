package cmpserver

import "sync"

// A request dir is removed after the handler returns: the repo-server waits
// for the stream's status, which gRPC sends when the handler returns, and
// removing a large repository's tree grows with its files: it would be part
// of every such request's time (docs/performance.md). The removal still happens, on its own goroutine; shutdown waits
// for it, and once shutdown has begun removals run inline.
type removals struct {
	mu       sync.Mutex
	wg       sync.WaitGroup
	finished bool
}

// run runs remove after the caller returns, or now once finish has begun.
func (r *removals) run(remove func()) {
	r.mu.Lock()
	if r.finished {
		r.mu.Unlock()
		remove()
		return
	}
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		remove()
	}()
}

// finish waits for the removals under way; later ones run inline.
func (r *removals) finish() {
	r.mu.Lock()
	r.finished = true
	r.mu.Unlock()
	r.wg.Wait()
}
