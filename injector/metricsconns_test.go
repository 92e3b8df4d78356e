package injector

import (
	"strings"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/pkg/serving"
	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
)

// TestMetricsPortCapsConnections: the metrics port had no connection cap. An
// attack run held 19,900 idle connections there (34 -> 486 MB, and 19,912 of
// the 20,000 file descriptors the webhook listener shares). With the default
// limits, a few hundred idle connections from ten addresses must leave at most
// serving.DefaultMetricsMaxConnections open, and the kubelet's next probe must
// be answered. The server's timeouts are long so only the limits close.
func TestMetricsPortCapsConnections(t *testing.T) {
	ts := startServerWith(t, "testdata/catalog.yaml", func(c *Options) {
		c.MetricsTimeouts = serving.Timeouts{ReadHeader: time.Hour, Read: time.Hour, Idle: time.Hour}
	})
	held := serving.DefaultMetricsMaxConnections
	n := held + 300
	closed := servingtest.ExpectConnCap(t, strings.TrimPrefix(ts.metricsURL, "http://"), n, 10, held, 20*time.Second)
	dropped := ts.samples(t).Sum("cmp_injector_metrics_connections_dropped_total")
	t.Logf("%d idle connections to the metrics port: %d closed, %v counted", n, closed, dropped)
	if dropped < float64(n-held) {
		t.Errorf("cmp_injector_metrics_connections_dropped_total %v, want at least %d", dropped, n-held)
	}
}
