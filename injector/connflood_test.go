package injector

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
)

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
			f := servingtest.StartFlood(t, strings.TrimPrefix(ts.webhookURL, "https://"),
				servingtest.FloodOptions{Workers: workers, Sources: tc.sources, Reconnect: tc.reconnect})
			for deadline := time.Now().Add(60 * time.Second); f.Dialed() < workers || openConns(t, ts) < float64(held); time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("flood did not settle: %d of %d workers dialed, %v connections open, want %d", f.Dialed(), workers, openConns(t, ts), held)
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

// The API server's connection is kept once it has sent a review over HTTP/2
// too (kube-apiserver speaks it to a webhook at a localhost URL): connections
// that send none are evicted around it, and it carries the next review.
func TestHTTP2ReviewConnectionIsKept(t *testing.T) {
	ts := startServerWith(t, "testdata/catalog.yaml", func(c *Options) { c.MaxConnections, c.MaxConnectionsPerIP = 2, 2 })
	c := h2Client(ts)
	defer c.CloseIdleConnections()
	review := func(uid string) bool {
		reused := false
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.webhookURL+"/mutate", bytes.NewReader(podReview(uid, "argocd", []byte(testPod), false)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %d", resp.Proto, resp.StatusCode)
		}
		return reused
	}
	review("first")
	// Three connections that send nothing: with one slot left, each takes it
	// from the one before.
	f := servingtest.StartFlood(t, strings.TrimPrefix(ts.webhookURL, "https://"), servingtest.FloodOptions{Workers: 3, Sources: 1})
	for deadline := time.Now().Add(10 * time.Second); f.Dialed() < 3 || ts.samples(t).Sum("cmp_injector_webhook_connections_dropped_total", "reason=evicted") < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("flood did not settle: %v evictions, want 2 (%v connections dropped in all)", ts.samples(t).Sum("cmp_injector_webhook_connections_dropped_total", "reason=evicted"), ts.samples(t).Sum("cmp_injector_webhook_connections_dropped_total"))
		}
	}
	if !review("second") {
		t.Error("the review's HTTP/2 connection was not kept: the second review needed a new one")
	}
}

// TestEmptyReviewsDoNotHoldSlots: any request to /mutate used to end a
// connection's probation; then any valid review, which a pod can forge, kept
// its connection for good. An attack run held all 1,024 slots with 4 source
// addresses × 256 connections, each sending POST /mutate {} (a 400) once a
// minute; after the API server's idle connection closed, every pod create
// failed for minutes. Only a review that decodes, with a request UID, keeps
// a connection now: here every slot is held by connections that sent an
// empty or malformed body, and a real review on a fresh connection from
// another address must still be answered within the test client's 10 s.
func TestEmptyReviewsDoNotHoldSlots(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"empty object", "{}"},
		{"not JSON", "x"},
		{"review without uid", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}`},
		// A review any pod can forge, answered like the API server's: its
		// connection is kept while it is answered, then evictable again.
		{"forged valid review", string(podReview("forged", "argocd", []byte(testPod), false))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const maxConns, perIP, sources = 32, 8, 4
			ts := startServerWith(t, "testdata/catalog.yaml", func(c *Options) {
				c.MaxConnections, c.MaxConnectionsPerIP = maxConns, perIP
			})
			req := fmt.Sprintf("POST /mutate HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(tc.body), tc.body)
			f := servingtest.StartFlood(t, strings.TrimPrefix(ts.webhookURL, "https://"),
				servingtest.FloodOptions{Workers: maxConns, Sources: sources, Request: req})
			// Every flood connection's request answered: refused, or (the
			// forged one) decided.
			bad := func() float64 {
				s := ts.samples(t)
				return s.Sum("cmp_injector_bad_requests_total") + s.Sum("cmp_injector_requests_total")
			}
			for deadline := time.Now().Add(60 * time.Second); f.Dialed() < maxConns || bad() < maxConns || openConns(t, ts) < maxConns; time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("flood did not settle: %d of %d workers dialed, %v refused reviews, %v connections open", f.Dialed(), maxConns, bad(), openConns(t, ts))
				}
			}
			t.Logf("%d connections from %d addresses, each sent %q: %v of %d slots held", maxConns, sources, tc.body, openConns(t, ts), maxConns)
			tr := ts.client.Transport.(*http.Transport).Clone()
			tr.DisableKeepAlives = true
			c := &http.Client{Timeout: 10 * time.Second, Transport: tr}
			resp, err := c.Post(ts.webhookURL+"/mutate", "application/json", strings.NewReader(string(podReview("after-empty-reviews", "argocd", []byte(testPod), false))))
			if err != nil {
				t.Fatalf("review after %d connections sent %q: %v", maxConns, tc.body, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"allowed":true`) {
				t.Fatalf("review after the flood: %d %s", resp.StatusCode, body)
			}
			if got := ts.samples(t).Sum("cmp_injector_webhook_connections_dropped_total"); got == 0 {
				t.Error("no flood connection was dropped to make room for the review")
			}
		})
	}
}
