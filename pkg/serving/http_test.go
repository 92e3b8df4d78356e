package serving_test

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/pkg/serving"
	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
)

func TestMetricsServerClosesIdleConnections(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := serving.MetricsServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }),
		serving.Timeouts{Idle: 100 * time.Millisecond}, nil)
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	servingtest.ExpectIdleClose(t, l.Addr().String(), 5*time.Second)
}

func TestDefaultsFillZeroFields(t *testing.T) {
	srv := serving.MetricsServer(http.NotFoundHandler(), serving.Timeouts{Idle: time.Second}, nil)
	d := serving.DefaultTimeouts()
	if srv.IdleTimeout != time.Second || srv.ReadTimeout != d.Read || srv.WriteTimeout != d.Write || srv.ReadHeaderTimeout != d.ReadHeader {
		t.Errorf("timeouts %v %v %v %v", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout)
	}
}
