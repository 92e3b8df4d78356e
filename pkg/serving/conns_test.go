package serving

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// limitRig is a LimitConns listener on loopback whose accepted connections
// are handed to the test, with the drops it reported.
type limitRig struct {
	addr     string
	accepted chan net.Conn
	mu       sync.Mutex
	drops    map[DropReason]int
}

func newLimitRig(t *testing.T, lim ConnLimits) *limitRig {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &limitRig{addr: ln.Addr().String(), accepted: make(chan net.Conn, 100), drops: map[DropReason]int{}}
	lim.OnDrop = func(d DropReason) { r.mu.Lock(); r.drops[d]++; r.mu.Unlock() }
	l := LimitConns(ln, lim)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			r.accepted <- c
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		close(r.accepted)
		for c := range r.accepted {
			c.Close()
		}
	})
	return r
}

func (r *limitRig) dropped(d DropReason) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.drops[d]
}

// dial connects from the loopback address 127.0.0.<src>.
func (r *limitRig) dial(t *testing.T, src byte) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, src)}}
	c, err := d.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// next is the next connection the listener hands out.
func (r *limitRig) next(t *testing.T) net.Conn {
	t.Helper()
	select {
	case c := <-r.accepted:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no connection accepted")
		return nil
	}
}

// closedByServer waits until the server side closed c (its read ends).
func closedByServer(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("connection still open")
	}
}

// keep keeps c with a request still in flight; the returned func ends it.
// pair dials from 127.0.0.src and returns both ends once it is accepted.
func (r *limitRig) pair(t *testing.T, src byte) (client, server net.Conn) {
	t.Helper()
	client = r.dial(t, src)
	return client, r.next(t)
}

// stillOpen: c's read times out instead of ending, so the server kept it.
func stillOpen(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var buf [1]byte
	var ne net.Error
	if _, err := c.Read(buf[:]); !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("%s: %v, want it still open", what, err)
	}
}

func keep(c net.Conn) (done func()) {
	return KeepConn(ConnContext(context.Background(), c))
}

// One address gets PerIP connections; more are closed at accept without
// costing anyone else a slot.
func TestLimitConnsPerIP(t *testing.T) {
	r := newLimitRig(t, ConnLimits{Max: 10, PerIP: 2})
	r.dial(t, 2)
	r.dial(t, 2)
	s1, _ := r.next(t), r.next(t)
	refused := r.dial(t, 2)
	closedByServer(t, refused)
	if n := r.dropped(dropPerIP); n != 1 {
		t.Errorf("per-IP drops: %d, want 1", n)
	}
	// Another address is admitted.
	r.dial(t, 3)
	r.next(t)
	// A freed slot is the address's again.
	s1.Close()
	r.dial(t, 2)
	r.next(t)
	if n := r.dropped(dropEvicted); n != 0 {
		t.Errorf("evictions: %d", n)
	}
}

// At Max, a new connection takes the slot of the oldest one on probation;
// kept ones with a request in flight are never evicted; with every slot so
// held, a new one waits until a slot frees.
func TestLimitConnsEvictsOldestOnProbation(t *testing.T) {
	r := newLimitRig(t, ConnLimits{Max: 3, PerIP: 3})
	r.dial(t, 2)
	s1 := r.next(t)
	keep(s1)
	c2 := r.dial(t, 3)
	r.next(t)
	r.dial(t, 4)
	s3 := r.next(t)
	r.dial(t, 5)
	s4 := r.next(t)
	closedByServer(t, c2) // the oldest on probation, not the older kept one
	if n := r.dropped(dropEvicted); n != 1 {
		t.Errorf("evictions: %d, want 1", n)
	}
	keep(s3)
	keep(s4)
	r.dial(t, 6)
	s1.Close()
	s5 := r.next(t)
	if got := s5.RemoteAddr().(*net.TCPAddr).IP.String(); got != "127.0.0.6" {
		t.Errorf("admitted %s, want the waiting 127.0.0.6", got)
	}
	if n := r.dropped(dropEvicted); n != 1 {
		t.Errorf("evictions: %d, want still 1 (kept connections are not evicted)", n)
	}
}

// Kept connections with nothing in flight are evictable, least recently used
// first, after every one on probation: a forged review per connection no
// longer holds a slot for good. One with a request in flight is not.
func TestLimitConnsEvictsTheIdlestKept(t *testing.T) {
	r := newLimitRig(t, ConnLimits{Max: 3, PerIP: 3})
	c1, s1 := r.pair(t, 2)
	c2, s2 := r.pair(t, 3)
	_, s3 := r.pair(t, 4)
	keep(s1)()       // used first, idle
	keep(s2)()       // used next, idle
	busy := keep(s3) // in flight
	defer busy()
	keep(s1)() // s1 used again: s2 is now the idlest
	r.dial(t, 5)
	r.next(t)
	closedByServer(t, c2)
	if n := r.dropped(dropIdle); n != 1 {
		t.Errorf("idle evictions: %d, want 1", n)
	}
	r.dial(t, 6)
	r.next(t)
	// The one admitted just before is on probation: it goes before s1.
	if n := r.dropped(dropEvicted); n != 1 {
		t.Errorf("probation evictions: %d, want 1", n)
	}
	stillOpen(t, c1, "s1, kept and used more recently")
}

// A connection with no kept request is closed after Probation; a kept one is
// not.
func TestLimitConnsProbation(t *testing.T) {
	// Long enough for the test to keep the second connection first even
	// on a loaded machine; the test waits for it once.
	r := newLimitRig(t, ConnLimits{Max: 10, PerIP: 10, Probation: time.Second})
	kept := r.dial(t, 2)
	keep(r.next(t))
	idle := r.dial(t, 2)
	r.next(t)
	closedByServer(t, idle)
	if n := r.dropped(dropProbation); n != 1 {
		t.Errorf("probation drops: %d, want 1", n)
	}
	stillOpen(t, kept, "kept connection")
}

// A kept connection the server is reading a request on (ConnState Active:
// the request has not reached KeepConn yet) is not evicted as idle.
func TestLimitConnsSparesAConnectionReadingARequest(t *testing.T) {
	r := newLimitRig(t, ConnLimits{Max: 2, PerIP: 2})
	c1, s1 := r.pair(t, 2)
	c2, s2 := r.pair(t, 3)
	keep(s1)()
	keep(s2)()
	TrackConnState(s1, http.StateActive) // s1, the idlest, is reading its next request
	r.dial(t, 4)
	r.next(t)
	closedByServer(t, c2)
	stillOpen(t, c1, "the connection reading a request")
}
