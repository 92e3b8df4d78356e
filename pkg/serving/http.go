// Package serving holds what the servers of both binaries share.
package serving

import (
	"log"
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

// MetricsServer is the http.Server of a metrics and health listener, with t's
// timeouts (zero fields: the defaults) and 64 KiB of headers at most. errLog
// may be nil.
func MetricsServer(h http.Handler, t Timeouts, errLog *log.Logger) *http.Server {
	t = t.withDefaults()
	return &http.Server{Handler: h, ErrorLog: errLog, MaxHeaderBytes: 64 << 10,
		ReadHeaderTimeout: t.ReadHeader, ReadTimeout: t.Read, WriteTimeout: t.Write, IdleTimeout: t.Idle}
}
