package servingtest

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// ExpectConnCap opens n idle TCP connections to the plain-HTTP port at addr,
// spread over the loopback addresses 127.0.0.2 to 127.0.0.<1+sources>, and
// fails t unless the server closes at least n-held of them, then unless a
// GET /healthz on a fresh connection from 127.0.0.1 still answers 200. held is
// the most the server's limits let those sources keep open. The server's own
// timeouts must be longer than wait, so that only its limits close anything.
// It returns how many of the n connections the server closed, for the log.
func ExpectConnCap(t testing.TB, addr string, n, sources, held int, wait time.Duration) int {
	t.Helper()
	if sources < 1 || sources > 250 {
		t.Fatalf("sources %d: want 1 to 250", sources)
	}
	closed := make(chan struct{}, n)
	var wg sync.WaitGroup
	conns := make([]net.Conn, 0, n)
	defer func() {
		// Unblocks the readers of the connections still open.
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
	}()
	for i := 0; i < n; i++ {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%sources))}, Timeout: wait}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d of %d: %v", i+1, n, err)
		}
		conns = append(conns, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The bound only keeps a reader from outliving the test; the
			// count, not the time, is what is checked.
			_ = c.SetReadDeadline(time.Now().Add(2 * wait))
			if _, err := c.Read(make([]byte, 1)); closedByPeer(err) {
				closed <- struct{}{}
			}
		}()
	}
	want := n - held
	got := 0
	timeout := time.NewTimer(wait)
	defer timeout.Stop()
	for got < want {
		select {
		case <-closed:
			got++
		case <-timeout.C:
			t.Fatalf("%d idle connections to %s: the server closed %d, want at least %d (it may hold %d)", n, addr, got, want, held)
		}
	}
	c := &http.Client{Timeout: wait, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz after %d idle connections: %v", n, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz after %d idle connections: %s", n, resp.Status)
	}
	return got
}

// closedByPeer reports a read error that ends the connection (EOF, or a
// reset when the server closed it with unread data), not the reader's own
// deadline.
func closedByPeer(err error) bool {
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}
