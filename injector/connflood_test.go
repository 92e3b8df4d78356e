package injector

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// flood is an attacker's connections to the webhook port from loopback
// addresses other than 127.0.0.1 (the whole 127/8 is loopback on Linux), so the
// test's reviews come from an address of their own, as the API server's do.
// Every third connection is plain TCP that never starts TLS; the others finish
// the handshake, ask for /healthz, read the answer and stay idle. With
// reconnect, a worker whose connection is closed opens a new one, as the
// attack run did.
type flood struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	dialed atomic.Int64 // workers whose first TCP connect completed
}

func startFlood(t *testing.T, addr string, workers, sources int, reconnect bool) *flood {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &flood{cancel: cancel, conns: map[net.Conn]struct{}{}}
	for i := 0; i < workers; i++ {
		src := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%sources))}
		plain := i%3 == 0
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			first := true
			for ctx.Err() == nil {
				f.once(ctx, addr, src, plain, &first)
				if !reconnect {
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
	t.Cleanup(f.stop)
	return f
}

// once opens one connection and holds it until the server closes it or the
// flood stops.
func (f *flood) once(ctx context.Context, addr string, src *net.TCPAddr, plain bool, first *bool) {
	d := net.Dialer{LocalAddr: src, Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
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
		c.Close()
		return
	}
	f.conns[c] = struct{}{}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.conns, c)
		f.mu.Unlock()
		c.Close()
	}()
	if !plain {
		// A bound on the handshake and request, so a connection the server
		// has not accepted yet does not block the worker forever.
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}) //nolint:gosec // an attacker does not verify
		if _, err := io.WriteString(tc, "GET /healthz HTTP/1.1\r\nHost: webhook\r\n\r\n"); err != nil {
			return
		}
		br := bufio.NewReader(tc)
		resp, err := http.ReadResponse(br, nil)
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

func (f *flood) stop() {
	f.cancel()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// openConns is the webhook's open-connections gauge.
func openConns(t *testing.T, ts *testServer) float64 {
	t.Helper()
	return ts.samples(t).Sum("cmp_injector_webhook_open_connections")
}

// TestReviewsAnsweredThroughConnectionFlood: connections that send no review
// must not lock the API server out. An attack run held all 1,024 slots with TLS
// connections that asked for /healthz and reconnected; every fresh review then
// waited behind them until the API server gave up (10 s), for minutes. Here
// the flood holds or cycles through every slot it can get, and reviews on
// fresh connections from another address must still be answered within the
// test client's 10 s (no timing is asserted beyond that bound).
func TestReviewsAnsweredThroughConnectionFlood(t *testing.T) {
	// Short: a small cap and 200 connections; otherwise the defaults and
	// 2,000 connections (4,000 descriptors here, under the usual limit).
	maxConns, perIP, workers := 0, 0, 2000
	if testing.Short() {
		maxConns, perIP, workers = 64, 16, 200
	}
	for _, tc := range []struct {
		name    string
		sources int
		// reconnect: the attack run's pattern. Without it the flood holds
		// what it got, which is when eviction, not the per-address cap,
		// frees a slot.
		reconnect bool
		perIP     func(maxConns, perIP int) int
		dropped   string
	}{
		{name: "one source reconnecting", sources: 1, reconnect: true,
			perIP: func(_, p int) int { return p }, dropped: "per_ip_cap"},
		{name: "many sources holding every slot", sources: 8,
			perIP: func(m, _ int) int { return m }, dropped: "evicted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServerWith(t, "testdata/catalog.yaml", func(c *Options) {
				c.MaxConnections = maxConns
				c.MaxConnectionsPerIP = tc.perIP(maxConns, perIP)
			})
			// Validate filled the defaults before the certificate was loaded,
			// which startServerWith waited for.
			m, p := ts.srv.cfg.MaxConnections, ts.srv.cfg.MaxConnectionsPerIP
			held := min(m, p*tc.sources)
			f := startFlood(t, strings.TrimPrefix(ts.webhookURL, "https://"), workers, tc.sources, tc.reconnect)
			for deadline := time.Now().Add(60 * time.Second); f.dialed.Load() < int64(workers) || openConns(t, ts) < float64(held); time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("flood did not settle: %d of %d workers dialed, %v connections open, want %d", f.dialed.Load(), workers, openConns(t, ts), held)
				}
			}
			t.Logf("flood of %d connections from %d address(es) holds %v of %d slots", workers, tc.sources, openConns(t, ts), m)
			for i := 0; i < 3; i++ {
				// A new connection for each review, as the API server opens
				// when its idle ones are gone.
				tr := ts.client.Transport.(*http.Transport).Clone()
				tr.DisableKeepAlives = true
				c := &http.Client{Timeout: 10 * time.Second, Transport: tr}
				resp, err := c.Post(ts.webhookURL+"/mutate", "application/json", strings.NewReader(string(podReview(fmt.Sprint("flood-", i), "argocd", []byte(testPod), false))))
				if err != nil {
					t.Fatalf("review %d during the flood: %v", i, err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"allowed":true`) {
					t.Fatalf("review %d during the flood: %d %s", i, resp.StatusCode, body)
				}
			}
			s := ts.samples(t)
			if got := s.Sum("cmp_injector_webhook_connections_dropped_total", "reason="+tc.dropped); got == 0 {
				t.Errorf("no connection dropped for %s: %v", tc.dropped, s.Sum("cmp_injector_webhook_connections_dropped_total"))
			}
			if got := s.Sum("cmp_injector_webhook_open_connections"); got > float64(m) {
				t.Errorf("%v connections open, more than the cap of %d", got, m)
			}
		})
	}
}
