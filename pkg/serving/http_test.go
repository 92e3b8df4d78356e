package serving_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/pkg/serving"
	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
)

func okHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
}

// startMetrics serves okHandler on loopback with o until the test ends.
func startMetrics(t *testing.T, o serving.MetricsOptions) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := serving.NewMetricsServer(okHandler(), o, nil)
	done := make(chan struct{})
	go func() { _ = srv.Serve(l); close(done) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return l.Addr().String()
}

func TestMetricsServerClosesIdleConnections(t *testing.T) {
	addr := startMetrics(t, serving.MetricsOptions{Timeouts: serving.Timeouts{Idle: 100 * time.Millisecond}})
	servingtest.ExpectIdleClose(t, addr, 5*time.Second)
}

func TestDefaultsFillZeroFields(t *testing.T) {
	srv := serving.NewMetricsServer(http.NotFoundHandler(), serving.MetricsOptions{Timeouts: serving.Timeouts{Idle: time.Second}}, nil)
	d := serving.DefaultTimeouts()
	if srv.IdleTimeout != time.Second || srv.ReadTimeout != d.Read || srv.WriteTimeout != d.Write || srv.ReadHeaderTimeout != d.ReadHeader {
		t.Errorf("timeouts %v %v %v %v", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout)
	}
	c := serving.MetricsConns{}.WithDefaults()
	if c.Max != serving.DefaultMetricsMaxConnections || c.PerIP != serving.DefaultMetricsMaxConnectionsPerIP {
		t.Errorf("default limits %+v", c)
	}
	if c := (serving.MetricsConns{Max: 4}).WithDefaults(); c.PerIP != 4 {
		t.Errorf("per-address limit with --metrics-max-connections 4: %d, want 4", c.PerIP)
	}
}

// TestMetricsServerCapsConnections: the metrics port had no connection cap
// (an attack run held 19,900 idle connections, 34 -> 486 MB). Idle
// connections a few hundred above a small cap are closed, both past the
// per-address cap and, from many addresses, past the total by evicting the
// oldest; a fresh probe is still answered. Timeouts are long so only the
// limits close anything.
func TestMetricsServerCapsConnections(t *testing.T) {
	long := serving.Timeouts{ReadHeader: time.Hour, Read: time.Hour, Idle: time.Hour}
	for _, tc := range []struct {
		name                  string
		max, perIP, sources   int
		wantPerIP, wantEvicts bool
	}{
		{name: "one address", max: 32, perIP: 8, sources: 1, wantPerIP: true},
		{name: "many addresses", max: 32, perIP: 32, sources: 20, wantEvicts: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			drops := map[serving.DropReason]int{}
			addr := startMetrics(t, serving.MetricsOptions{Timeouts: long, Conns: serving.MetricsConns{Max: tc.max, PerIP: tc.perIP,
				OnDrop: func(r serving.DropReason) { mu.Lock(); drops[r]++; mu.Unlock() }}})
			held := min(tc.max, tc.perIP*tc.sources)
			n := held + 300
			closed := servingtest.ExpectConnCap(t, addr, n, tc.sources, held, 20*time.Second)
			mu.Lock()
			defer mu.Unlock()
			t.Logf("%d idle connections: %d closed, drops %v", n, closed, drops)
			if tc.wantPerIP && drops["per_ip_cap"] == 0 || tc.wantEvicts && drops["evicted"] == 0 {
				t.Errorf("drops %v: want per_ip_cap %v, evicted %v", drops, tc.wantPerIP, tc.wantEvicts)
			}
		})
	}
}

func TestMetricsConnsValidate(t *testing.T) {
	for _, tc := range []struct {
		c    serving.MetricsConns
		want string
	}{
		{serving.MetricsConns{}, ""},
		{serving.MetricsConns{Max: 4}, ""},
		{serving.MetricsConns{Max: -1}, "--metrics-max-connections must be at least 1"},
		{serving.MetricsConns{PerIP: -1}, "--metrics-max-connections-per-ip must be at least 1"},
		{serving.MetricsConns{Max: 4, PerIP: 5}, "--metrics-max-connections-per-ip (5) must not be more than --metrics-max-connections (4)"},
		{serving.MetricsConns{PerIP: 65}, "must not be more than --metrics-max-connections (64)"},
	} {
		err := tc.c.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.want)
		}
	}
}
