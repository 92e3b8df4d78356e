package e2e

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// TestConnectionFlood: pods that flood the webhook port with connections that
// send no review must not lock the API server out. An attack run held all
// 1,024 slots with TLS connections that asked for /healthz and reconnected;
// `kubectl create` then failed after 10 s with "failed calling webhook ...
// context deadline exceeded", for minutes. Here the injector runs with its
// defaults, the flood (2,000 connections from 127.0.0.2 and up) starts before
// the webhook is installed, so the API server (on 127.0.0.1) has to open a
// fresh connection through it; no call of the API server's may fail, and a pod
// must be created and injected. The webhook's own timeout (10 s) is the only
// bound.
func TestConnectionFlood(t *testing.T) {
	const workers = 2000
	for _, tc := range []struct {
		name      string
		sources   int
		reconnect bool
		dropped   string
	}{
		// The attack run: one pod, reconnecting. The per-address cap
		// leaves it a quarter of the slots.
		{"one source reconnecting", 1, true, "per_ip_cap"},
		// Eight pods holding all the slots: the API server's connection takes
		// the slot of the oldest one that has sent no review.
		{"many sources holding every slot", 8, false, "evicted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// An injector of its own: a new URL is a new client in the API
			// server, so no connection of an earlier test is reused.
			dir := t.TempDir()
			in, err := harness.NewInjector(env.bins["cmp-injector"], dir, catalogFor(t, true, map[string][]string{"*": {"helm"}}), env.logFile)
			if err != nil {
				t.Fatal(err)
			}
			if err := in.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = in.Stop() })
			f := servingtest.StartFlood(t, fmt.Sprintf("127.0.0.1:%d", in.Port),
				servingtest.FloodOptions{Workers: workers, Sources: tc.sources, Reconnect: tc.reconnect})
			held := float64(min(1024, 256*tc.sources))
			open := func() float64 {
				m, err := in.Metrics()
				if err != nil {
					t.Fatal(err)
				}
				return harness.Sum(m, "cmp_injector_webhook_open_connections")
			}
			if err := harness.Eventually(60*time.Second, 50*time.Millisecond, func() (bool, error) {
				n := open()
				return f.Dialed() == workers && n >= held, fmt.Errorf("%d of %d workers dialed, %v connections open, want %v", f.Dialed(), workers, n, held)
			}); err != nil {
				t.Fatalf("flood did not settle: %v", err)
			}
			t.Logf("flood of %d connections from %d address(es) holds %v of 1024 slots", workers, tc.sources, open())

			installWebhook(t, in)
			ns := newNamespace(t, "flood", enabledNS)
			start := time.Now()
			// Until the API server knows the webhook, a dry-run create comes
			// back uninjected; from then on every call must be answered. A
			// failed call fails the test (waitActive would retry it).
			probe := loadPod(t, "repo-server-pod.yaml")
			probe.Name = "probe"
			if err := harness.Eventually(30*time.Second, 20*time.Millisecond, func() (bool, error) {
				got, err := env.cp.Client().CreatePod(ns, probe.DeepCopy(), true)
				if err != nil {
					t.Fatalf("pod create (dry run) during the flood: %v", err)
				}
				_, ok := got.Annotations[keys.StatusAnnotation]
				return ok, errors.New("the API server does not call the webhook yet")
			}); err != nil {
				t.Fatal(err)
			}
			t.Logf("the API server reached the webhook through the flood %s after installing it", time.Since(start).Round(time.Millisecond))
			pod := loadPod(t, "repo-server-pod.yaml")
			start = time.Now()
			stored := createStored(t, ns, pod)
			if st := status(t, stored); len(st.Plugins) == 0 {
				t.Fatalf("pod created during the flood was not injected: %+v", st)
			}
			t.Logf("pod created and injected during the flood in %s", time.Since(start).Round(time.Millisecond))
			m, err := in.Metrics()
			if err != nil {
				t.Fatal(err)
			}
			if n := harness.Sum(m, "cmp_injector_webhook_connections_dropped_total", "reason="+tc.dropped); n == 0 {
				t.Errorf("no connection dropped for %s", tc.dropped)
			}
			if n := harness.Sum(m, "cmp_injector_requests_total", "decision="+string(inject.Injected)); n == 0 {
				t.Errorf("no injection counted")
			}
		})
	}
}
