package servingtest

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Flood is an attacker's connections to a TLS port, from the loopback
// addresses 127.0.0.2 and up (the whole 127/8 is loopback on Linux), so a test's
// own requests, and an API server's on 127.0.0.1, come from an address of
// their own. Every third connection is plain TCP that never starts TLS; the
// others finish the handshake, send one request over HTTP/1.1 (GET /healthz,
// or FloodOptions.Request), read the answer and stay idle. With Reconnect, a worker whose connection is closed opens a
// new one, as the attack run on the webhook did.
type Flood struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	dialed atomic.Int64
}

// FloodOptions say how many connections, from how many addresses.
type FloodOptions struct {
	Workers   int
	Sources   int // at most 250
	Reconnect bool
	// Request is the raw HTTP/1.1 request each TLS connection sends once
	// ("": GET /healthz, and every third connection plain TCP). With a
	// Request set every connection is TLS and sends it.
	Request string
}

// StartFlood starts o.Workers workers against addr; t's cleanup stops them.
func StartFlood(t testing.TB, addr string, o FloodOptions) *Flood {
	t.Helper()
	if o.Sources < 1 || o.Sources > 250 {
		t.Fatalf("flood sources %d: want 1 to 250", o.Sources)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &Flood{cancel: cancel, conns: map[net.Conn]struct{}{}}
	request := o.Request
	if request == "" {
		request = "GET /healthz HTTP/1.1\r\nHost: webhook\r\n\r\n"
	}
	for i := 0; i < o.Workers; i++ {
		src := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%o.Sources))}
		plain := i%3 == 0 && o.Request == ""
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			first := true
			for ctx.Err() == nil {
				f.once(ctx, addr, src, plain, request, &first)
				if !o.Reconnect {
					return
				}
				// Pacing only, so refused workers do not spin: nothing is
				// measured against it.
				select {
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		}()
	}
	t.Cleanup(f.Stop)
	return f
}

// Dialed is how many workers have finished their first connect, successful
// or not.
func (f *Flood) Dialed() int { return int(f.dialed.Load()) }

// once opens one connection and holds it until the server closes it or the
// flood stops.
func (f *Flood) once(ctx context.Context, addr string, src *net.TCPAddr, plain bool, request string, first *bool) {
	d := net.Dialer{LocalAddr: src, Timeout: 5 * time.Second}
	raw, err := d.DialContext(ctx, "tcp", addr)
	if *first {
		*first = false
		f.dialed.Add(1)
	}
	if err != nil {
		return
	}
	f.mu.Lock()
	if ctx.Err() != nil {
		f.mu.Unlock()
		raw.Close()
		return
	}
	f.conns[raw] = struct{}{}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.conns, raw)
		f.mu.Unlock()
		raw.Close()
	}()
	c := raw
	if !plain {
		// A bound on the handshake and request, so a connection the server
		// has not accepted yet does not hold the worker forever.
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}) //nolint:gosec // an attacker does not verify
		if _, err := io.WriteString(tc, request); err != nil {
			return
		}
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		_ = c.SetDeadline(time.Time{})
		c = tc
	}
	// Idle until the server closes the connection or the flood stops.
	_, _ = io.Copy(io.Discard, c)
}

// Stop closes every connection and waits for the workers.
func (f *Flood) Stop() {
	f.cancel()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}
