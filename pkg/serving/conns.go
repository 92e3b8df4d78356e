package serving

import (
	"container/list"
	"context"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// ConnLimits bound the connections of a listener that exists for one kind of
// request from one kind of client (the webhook: reviews from the API server).
// A connection is on probation from accept until a handler calls KeepConn for
// one of its requests; until then it is cheap to drop. An attack run held
// every slot of a plain connection cap with TLS connections that only asked
// for /healthz and reconnected, and the API server's reviews waited behind
// them until they timed out. A kept connection is evictable too while no kept
// request is in flight on it, least recently used first: a pod can forge a
// review the handler keeps, and one idle kept connection per slot would
// otherwise hold the cap against the API server for good.
type ConnLimits struct {
	// Max is the most connections held at once. When they are all held, a new
	// one takes the slot of the oldest connection on probation, else of the
	// kept one idle the longest; when every one has a kept request in
	// flight, it waits in the listen backlog until a slot frees.
	Max int
	// PerIP is the most connections held at once from one remote address
	// (at most Max); more are closed as soon as they are accepted, so one
	// client cannot take every slot.
	PerIP int
	// Probation is the longest a connection stays open without a kept
	// request; zero: no limit.
	Probation time.Duration
	// OnDrop, if set, is called once for every connection the limits close,
	// with the reason.
	OnDrop func(DropReason)
}

// DropReason says why the limits closed a connection; the values are metric
// label values.
type DropReason string

const (
	// dropPerIP: accepted while its address already held PerIP connections.
	dropPerIP DropReason = "per_ip_cap"
	// dropEvicted: on probation, closed to make room for a new connection
	// while all Max slots were held.
	dropEvicted DropReason = "evicted"
	// dropProbation: no kept request within Probation.
	dropProbation DropReason = "probation"
	// dropIdle: kept, with no kept request in flight, the least recently
	// used, closed to make room while all Max slots were held and none was
	// on probation.
	dropIdle DropReason = "evicted_idle"
)

// LimitConns returns l bounded by lim. Its connections must reach handlers
// through ConnContext (http.Server.ConnContext) for KeepConn to find them.
// Accept is meant to be called from one goroutine, as http.Server does.
func LimitConns(l net.Listener, lim ConnLimits) net.Listener {
	cl := &connLimiter{Listener: l, lim: lim, perIP: map[netip.Addr]int{}}
	cl.cond = sync.NewCond(&cl.mu)
	return cl
}

type connLimiter struct {
	net.Listener
	lim ConnLimits

	mu     sync.Mutex
	cond   *sync.Cond // signalled when a slot frees or the listener closes
	open   int
	perIP  map[netip.Addr]int
	trial  list.List // *limitedConn on probation, oldest first
	idle   list.List // *limitedConn kept, no kept request in flight, least recently used first
	closed bool
}

type limitedConn struct {
	net.Conn
	l    *connLimiter
	addr netip.Addr

	// Guarded by l.mu.
	kept     bool // a kept request has begun: past probation
	released bool
	elem     *list.Element // in l.trial while on probation
	idleElem *list.Element // in l.idle while kept with nothing in flight
	active   int           // kept requests in flight
	busy     bool          // the server reads or serves a request (ConnState)
	timer    *time.Timer
}

// settleLocked puts c in l.idle exactly when it is kept, open and carries
// nothing: no kept request and no request the server is reading yet (one
// that has not reached its handler's KeepConn must not lose its connection).
func (c *limitedConn) settleLocked() {
	want := c.kept && !c.released && c.active == 0 && !c.busy
	switch {
	case want && c.idleElem == nil:
		c.idleElem = c.l.idle.PushBack(c)
		c.l.cond.Broadcast()
	case !want && c.idleElem != nil:
		c.l.idle.Remove(c.idleElem)
		c.idleElem = nil
	}
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		l.waitRoom()
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc, victim, why, drop := l.admit(c)
		// Counted before the close, so whoever sees a connection closed
		// finds it counted.
		if victim != nil {
			l.dropped(why)
			_ = victim.Conn.Close()
		}
		if lc == nil {
			if drop != "" {
				l.dropped(drop)
			}
			_ = c.Close()
			continue
		}
		return lc, nil
	}
}

// waitRoom returns when a new connection could be admitted: a free slot, or
// one on probation or kept and idle to evict. Meanwhile new ones wait in the kernel's backlog,
// as with netutil.LimitListener.
func (l *connLimiter) waitRoom() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for !l.closed && l.open >= l.lim.Max && l.trial.Len() == 0 && l.idle.Len() == 0 {
		l.cond.Wait()
	}
}

// admit takes a slot for c, evicting when all are held the oldest connection
// on probation, else the kept one idle the longest (victim, closed for why).
// A nil conn: c is to be closed, counted under drop unless empty (the
// listener closed).
func (l *connLimiter) admit(c net.Conn) (lc, victim *limitedConn, why, drop DropReason) {
	addr := remoteAddr(c)
	l.mu.Lock()
	defer l.mu.Unlock()
	// Before any eviction: a connection refused for its address must not cost
	// another one its slot. Counts only fall while we wait below.
	if l.perIP[addr] >= l.lim.PerIP {
		return nil, nil, "", dropPerIP
	}
	for l.open >= l.lim.Max {
		if e := l.trial.Front(); e != nil {
			victim, why = e.Value.(*limitedConn), dropEvicted
		} else if e := l.idle.Front(); e != nil {
			victim, why = e.Value.(*limitedConn), dropIdle
		}
		if victim != nil {
			l.releaseLocked(victim)
			break
		}
		// Every slot got a kept request in flight between waitRoom and
		// Accept.
		if l.closed {
			return nil, nil, "", ""
		}
		l.cond.Wait()
	}
	lc = &limitedConn{Conn: c, l: l, addr: addr}
	l.open++
	l.perIP[addr]++
	lc.elem = l.trial.PushBack(lc)
	if l.lim.Probation > 0 {
		lc.timer = time.AfterFunc(l.lim.Probation, lc.probationOver)
	}
	return lc, victim, why, ""
}

// releaseLocked gives back lc's slot, once.
func (l *connLimiter) releaseLocked(lc *limitedConn) {
	if lc.released {
		return
	}
	lc.released = true
	l.open--
	if n := l.perIP[lc.addr] - 1; n > 0 {
		l.perIP[lc.addr] = n
	} else {
		delete(l.perIP, lc.addr)
	}
	if lc.elem != nil {
		l.trial.Remove(lc.elem)
		lc.elem = nil
	}
	if lc.idleElem != nil {
		l.idle.Remove(lc.idleElem)
		lc.idleElem = nil
	}
	if lc.timer != nil {
		lc.timer.Stop()
	}
	l.cond.Broadcast()
}

func (l *connLimiter) dropped(r DropReason) {
	if l.lim.OnDrop != nil {
		l.lim.OnDrop(r)
	}
}

func (l *connLimiter) Close() error {
	l.mu.Lock()
	l.closed = true
	l.cond.Broadcast()
	l.mu.Unlock()
	return l.Listener.Close()
}

func (c *limitedConn) Close() error {
	c.l.mu.Lock()
	c.l.releaseLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// NetConn is the accepted connection, for code that unwraps connections.
func (c *limitedConn) NetConn() net.Conn { return c.Conn }

func (c *limitedConn) probationOver() {
	c.l.mu.Lock()
	over := !c.released && c.elem != nil
	if over {
		c.l.releaseLocked(c)
	}
	c.l.mu.Unlock()
	if over {
		c.l.dropped(dropProbation)
		_ = c.Conn.Close()
	}
}

// begin ends c's probation and marks a kept request in flight: until end,
// c is neither evicted nor timed out.
func (c *limitedConn) begin() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	c.kept = true
	if c.elem != nil {
		c.l.trial.Remove(c.elem)
		c.elem = nil
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	c.active++
	c.settleLocked()
}

// end marks a kept request of c done; with none left in flight, c is the
// most recently used of the idle kept connections.
func (c *limitedConn) end() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	c.active--
	c.settleLocked()
}

// TrackConnState is (or is called by) the http.Server.ConnState of a server
// on a LimitConns listener: a connection the server is reading or serving a
// request on is not evicted as idle, HTTP/1.1 or HTTP/2 (whose server reports
// Active while any stream is open).
func TrackConnState(c net.Conn, state http.ConnState) {
	lc := limitedOf(c)
	if lc == nil || (state != http.StateActive && state != http.StateIdle) {
		return
	}
	lc.l.mu.Lock()
	defer lc.l.mu.Unlock()
	lc.busy = state == http.StateActive
	lc.settleLocked()
}

// remoteAddr is c's peer address without a port; IPv4-mapped IPv6 addresses
// count as their IPv4 address. The zero Addr for a non-IP peer (one bucket).
func remoteAddr(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

type connKey struct{}

// ConnContext is the http.Server.ConnContext of a server on a LimitConns
// listener: it records the connection in every request's context for KeepConn.
// c may wrap the limited connection (tls.Conn does).
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if lc := limitedOf(c); lc != nil {
		return context.WithValue(ctx, connKey{}, lc)
	}
	return ctx
}

// limitedOf is the limited connection c is or wraps (tls.Conn does), or nil.
func limitedOf(c net.Conn) *limitedConn {
	for c != nil {
		if lc, ok := c.(*limitedConn); ok {
			return lc
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = u.NetConn()
	}
	return nil
}

// KeepConn ends the probation of the connection that carried ctx's request
// (the request is one the server exists for) and holds it against eviction
// until the returned func is called, when the request is answered. It does
// nothing for a connection of another listener.
func KeepConn(ctx context.Context) (done func()) {
	if lc, ok := ctx.Value(connKey{}).(*limitedConn); ok {
		lc.begin()
		return lc.end
	}
	return func() {}
}
