package cmpserver

import (
	"context"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"google.golang.org/grpc"
)

// A sidecar is idle almost all the time, and what it holds then is what a
// node's memory cgroup charges to it. Unpacking a request grows the Go heap
// (buffers, tar headers, the writers' pooled file contents: about 12 MiB of
// anonymous memory after a 1,000-file repository, against 2.6 MiB at start),
// and once the request ends nothing allocates, so nothing triggers a
// collection: the garbage stays resident until the runtime's forced
// collection two minutes later, and then goes back to the kernel only
// gradually. So once no request has run for a short while, the server
// collects and returns the free heap at once (debug.FreeOSMemory): two
// collections of a small heap per idle period (a few milliseconds), never
// during a request's work, and none at all on a server that is never idle.

// DefaultReturnMemoryAfter is long enough for a burst of requests (the
// repo-server's MatchRepository and GenerateManifest for one Application come
// back to back) to pay no collection between them.
const DefaultReturnMemoryAfter = time.Second

// idleMemory counts the requests in flight and returns the free heap once
// none has run for after.
type idleMemory struct {
	after time.Duration
	free  func() // debug.FreeOSMemory; tests count calls
	mu    sync.Mutex
	busy  int
	timer *time.Timer
	// gen tells a timer that fires late, after a request began and ended
	// again, that its idle period is over.
	gen uint64
}

func newIdleMemory(after time.Duration) *idleMemory {
	return &idleMemory{after: after, free: returnFreeHeap}
}

// returnFreeHeap collects twice: a sync.Pool keeps what it holds through one
// collection (its victim cache), and the unpack's pooled file buffers (up to
// 33 of 64 KiB) are what one collection left behind: 4.5-7.2 MiB of
// anonymous memory after three 1,000-file requests with one collection,
// 4.3-4.8 MiB with two (2.5 MiB at start). The second, inside FreeOSMemory,
// frees them and returns every free page.
func returnFreeHeap() {
	runtime.GC()
	debug.FreeOSMemory()
}

func (m *idleMemory) begin() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.busy++
	m.gen++
	if m.timer != nil {
		m.timer.Stop()
		m.timer = nil
	}
}

func (m *idleMemory) end() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.busy--
	if m.busy > 0 || m.after <= 0 {
		return
	}
	gen := m.gen
	m.timer = time.AfterFunc(m.after, func() { m.fire(gen) })
}

func (m *idleMemory) fire(gen uint64) {
	m.mu.Lock()
	idle := m.busy == 0 && m.gen == gen
	if idle {
		m.timer = nil
	}
	m.mu.Unlock()
	if idle {
		m.free()
	}
}

// stop cancels a pending return (shutdown).
func (m *idleMemory) stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen++
	if m.timer != nil {
		m.timer.Stop()
		m.timer = nil
	}
}

func (m *idleMemory) unaryInterceptor(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	m.begin()
	defer m.end()
	return handler(ctx, req)
}

func (m *idleMemory) streamInterceptor(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	m.begin()
	defer m.end()
	return handler(srv, ss)
}
