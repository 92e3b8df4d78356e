package cmpserver

import (
	"sync/atomic"
	"testing"
	"time"
)

func countingIdle(after time.Duration) (*idleMemory, *atomic.Int32) {
	var n atomic.Int32
	m := newIdleMemory(after)
	m.free = func() { n.Add(1) }
	return m, &n
}

func waitCount(t *testing.T, n *atomic.Int32, want int32) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for n.Load() != want {
		if time.Now().After(deadline) {
			t.Fatalf("free called %d times, want %d", n.Load(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestIdleMemoryOncePerIdlePeriod: the heap is returned once after the last
// request of a burst ends, never while one is in flight, and again after the
// next burst.
func TestIdleMemoryOncePerIdlePeriod(t *testing.T) {
	m, n := countingIdle(10 * time.Millisecond)
	m.begin()
	m.begin()
	m.end() // one still in flight
	time.Sleep(50 * time.Millisecond)
	if got := n.Load(); got != 0 {
		t.Fatalf("free called %d times with a request in flight", got)
	}
	m.end()
	waitCount(t, n, 1)
	time.Sleep(50 * time.Millisecond)
	if got := n.Load(); got != 1 {
		t.Fatalf("free called %d times in one idle period, want 1", got)
	}
	m.begin()
	m.end()
	waitCount(t, n, 2)
}

// TestIdleMemoryLateTimer: a timer that fires after a new request began (and
// maybe ended) belongs to an idle period that is over, and does nothing.
func TestIdleMemoryLateTimer(t *testing.T) {
	m, n := countingIdle(time.Hour)
	m.begin()
	m.end()
	stale := m.gen
	m.begin()
	m.fire(stale) // busy
	m.end()
	m.fire(stale) // idle again, but a later period
	if got := n.Load(); got != 0 {
		t.Fatalf("a stale timer freed memory %d times", got)
	}
	m.fire(m.gen)
	if got := n.Load(); got != 1 {
		t.Fatalf("the current period's timer: free called %d times, want 1", got)
	}
	m.stop()
}

// TestIdleMemoryOff: 0 never returns memory, and stop cancels a pending return.
func TestIdleMemoryOff(t *testing.T) {
	m, n := countingIdle(0)
	m.begin()
	m.end()
	if m.timer != nil || n.Load() != 0 {
		t.Fatal("a timer was set with the return off")
	}
	m, n = countingIdle(20 * time.Millisecond)
	m.begin()
	m.end()
	m.stop()
	time.Sleep(100 * time.Millisecond)
	if got := n.Load(); got != 0 {
		t.Fatalf("free called %d times after stop", got)
	}
}
