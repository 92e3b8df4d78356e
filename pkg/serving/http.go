// Package serving holds what the servers of both binaries share.
package serving

import (
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"time"
)

// Timeouts bound the connections of a plain-HTTP listener (metrics, health):
// a slow or idle client is disconnected instead of holding memory forever.
type Timeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
}

// DefaultTimeouts suit scrapers and probes, which send one small request and
// read a response of at most a few MB.
func DefaultTimeouts() Timeouts {
	return Timeouts{ReadHeader: 10 * time.Second, Read: 10 * time.Second, Write: 30 * time.Second, Idle: 60 * time.Second}
}

// withDefaults fills each zero field from DefaultTimeouts.
func (t Timeouts) withDefaults() Timeouts {
	d := DefaultTimeouts()
	for _, f := range []struct{ v, def *time.Duration }{{&t.ReadHeader, &d.ReadHeader}, {&t.Read, &d.Read}, {&t.Write, &d.Write}, {&t.Idle, &d.Idle}} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	return t
}

// MetricsConns bound the connections a metrics and health listener holds. Its
// clients are the kubelet's probes (a new connection each, from the node's
// address) and a few scrapers (one keep-alive connection each), so a few
// dozen slots are plenty. Without a cap an attack run held 19,900 idle
// connections on the injector's metrics port: 34 -> 486 MB, and nearly all
// the file descriptors its webhook listener needs too.
type MetricsConns struct {
	// Max is the most connections held at once (the flag
	// --metrics-max-connections); zero: DefaultMetricsMaxConnections.
	Max int
	// PerIP is the most held from one client address (at most Max; the flag
	// --metrics-max-connections-per-ip); zero: DefaultMetricsMaxConnectionsPerIP,
	// or Max when lower.
	PerIP int
	// OnDrop, if set, is called for every connection the limits close.
	OnDrop func(DropReason)
}

// Defaults of MetricsConns: 64 connections of about 50 KB each bound the port
// to a few MB; one address gets a quarter, so one pod flooding the port leaves
// the rest to the kubelet and the scrapers.
const (
	DefaultMetricsMaxConnections      = 64
	DefaultMetricsMaxConnectionsPerIP = 16
)

// WithDefaults fills zero fields as their comments say. A negative field,
// which Validate rejects, is taken as zero too, so a caller that skipped
// Validate gets the defaults instead of a listener that never accepts.
func (c MetricsConns) WithDefaults() MetricsConns {
	if c.Max <= 0 {
		c.Max = DefaultMetricsMaxConnections
	}
	if c.PerIP <= 0 {
		c.PerIP = min(DefaultMetricsMaxConnectionsPerIP, c.Max)
	}
	return c
}

// Validate rejects limits that cannot work, naming the flags; zero fields
// are the defaults, not errors.
func (c MetricsConns) Validate() error {
	var errs []error
	if c.Max < 0 {
		errs = append(errs, fmt.Errorf("--metrics-max-connections must be at least 1 (0: %d), got %d", DefaultMetricsMaxConnections, c.Max))
	}
	if c.PerIP < 0 {
		errs = append(errs, fmt.Errorf("--metrics-max-connections-per-ip must be at least 1 (0: %d), got %d", DefaultMetricsMaxConnectionsPerIP, c.PerIP))
	}
	if d := c.WithDefaults(); len(errs) == 0 && d.PerIP > d.Max {
		errs = append(errs, fmt.Errorf("--metrics-max-connections-per-ip (%d) must not be more than --metrics-max-connections (%d)", d.PerIP, d.Max))
	}
	return errors.Join(errs...)
}

// MetricsOptions are a metrics and health listener's timeouts and limits;
// zero fields take the defaults.
type MetricsOptions struct {
	Timeouts Timeouts
	Conns    MetricsConns
}

// MetricsServer is the http.Server of a metrics and health listener. Serve
// puts the listener under its connection limits: use it, not the embedded
// server's Serve.
type MetricsServer struct {
	*http.Server
	conns MetricsConns
}

// NewMetricsServer serves h with o's timeouts and limits (zero fields: the
// defaults) and 64 KiB of headers at most. errLog may be nil.
func NewMetricsServer(h http.Handler, o MetricsOptions, errLog *log.Logger) *MetricsServer {
	t := o.Timeouts.withDefaults()
	return &MetricsServer{
		Server: &http.Server{Handler: h, ErrorLog: errLog, MaxHeaderBytes: 64 << 10,
			ReadHeaderTimeout: t.ReadHeader, ReadTimeout: t.Read, WriteTimeout: t.Write, IdleTimeout: t.Idle},
		conns: o.Conns.WithDefaults(),
	}
}

// Serve serves l under the connection limits. Unlike the webhook's, no request
// ends a connection's probation: every request on this port is one its
// clients make, so an attacker's /healthz is as good as the kubelet's, and a
// connection kept for asking would let a flood that asks once a minute hold
// every slot. So a new connection always takes the slot of the oldest one
// when all are held (the kubelet's probe never waits behind a flood), and
// idle ones close at the server's timeouts. A scraper whose keep-alive
// connection is evicted reconnects at its next scrape.
func (s *MetricsServer) Serve(l net.Listener) error {
	return s.Server.Serve(LimitConns(l, ConnLimits{Max: s.conns.Max, PerIP: s.conns.PerIP, OnDrop: s.conns.OnDrop}))
}

// ListenAndServe listens on the server's Addr and calls Serve, so the limits
// apply here too.
func (s *MetricsServer) ListenAndServe() error {
	addr := s.Addr
	if addr == "" {
		addr = ":http"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return s.Serve(l)
}
