package serving

import (
	"io"
	"net/http"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// healthRoutes adds the probes both servers answer to r: /healthz (the process
// serves HTTP) and /readyz (ready returns nil; otherwise 503 with its reason).
func healthRoutes(r *mux.Router, ready func() error) {
	r.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	}).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/readyz", ReadyHandler(ready)).Methods(http.MethodGet, http.MethodHead)
}

// ReadyHandler answers 200 when ready returns nil, else 503 with its reason.
func ReadyHandler(ready func() error) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	}
}

// MetricsRouter is the plain-HTTP mux of both servers' metrics listener:
// healthRoutes and /metrics from reg.
func MetricsRouter(reg prometheus.Gatherer, ready func() error) *mux.Router {
	r := mux.NewRouter()
	healthRoutes(r, ready)
	r.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})).Methods(http.MethodGet, http.MethodHead)
	return r
}
