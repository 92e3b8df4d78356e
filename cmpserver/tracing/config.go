// Package tracing sends cmp-server's spans to an OpenTelemetry collector over
// OTLP/gRPC, configured with argocd-cmp-server's flags and environment
// variables, and starts the spans of a request's phases. With no address set
// nothing is exported, no stats handler is installed and a phase's span is
// never made (see Start).
package tracing

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// Config is the exporter's settings: argocd-cmp-server's --otlp-* flags.
type Config struct {
	// Address is the collector's host:port (OTLP over gRPC); "" turns
	// tracing off.
	Address string
	// Insecure sends in plaintext (Argo CD's default); otherwise TLS with the
	// OTEL_EXPORTER_OTLP_* certificate files, else the system's roots.
	Insecure bool
	// Headers are sent with each export (e.g. a collector's auth token).
	Headers map[string]string
	// Attrs are extra resource attributes, "key:value" each.
	Attrs []string
	// SampleRatio is the share of new traces recorded, 0 to 1; a request
	// that arrives in a trace follows its parent's decision.
	SampleRatio float64
}

// Flags registers the --otlp-* flags on fs, each defaulting to its
// ARGOCD_CMP_SERVER_OTLP_* variable. Unlike Argo CD, which logs a bad value and
// takes the default, a bad value is an error here: a sidecar that silently
// does not trace is what an operator finds out only when the trace is needed.
func Flags(fs *flag.FlagSet, c *Config) error {
	var errs []error
	envErr := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	c.Address = os.Getenv(keys.EnvCMPServerOTLPAddress)
	c.Insecure = true
	if v := os.Getenv(keys.EnvCMPServerOTLPInsecure); v != "" {
		b, err := parseBool(v)
		c.Insecure = b
		envErr(envError(keys.EnvCMPServerOTLPInsecure, v, err))
	}
	c.Headers = map[string]string{}
	if v := os.Getenv(keys.EnvCMPServerOTLPHeaders); strings.TrimSpace(v) != "" {
		// Not quoted in the error: headers may hold credentials.
		if err := addHeaders(c.Headers, v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", keys.EnvCMPServerOTLPHeaders, err))
		}
	}
	if v := os.Getenv(keys.EnvCMPServerOTLPAttrs); v != "" {
		c.Attrs = splitTrim(v)
	}
	c.SampleRatio = 1
	if v := os.Getenv(keys.EnvCMPServerOTLPSampleRatio); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		c.SampleRatio = f
		envErr(envError(keys.EnvCMPServerOTLPSampleRatio, v, err))
	}

	fs.StringVar(&c.Address, "otlp-address", c.Address, "OpenTelemetry collector host:port (OTLP over gRPC) to send traces to; empty: no tracing (env "+keys.EnvCMPServerOTLPAddress+")")
	fs.BoolVar(&c.Insecure, "otlp-insecure", c.Insecure, "send traces in plaintext; false: TLS with the "+keys.EnvOTLPCertificate+" files, else the system's roots (env "+keys.EnvCMPServerOTLPInsecure+")")
	fs.Var(&headersFlag{m: c.Headers}, "otlp-headers", "headers sent with traces, key=value pairs separated by commas (env "+keys.EnvCMPServerOTLPHeaders+")")
	fs.Var(&attrsFlag{s: &c.Attrs}, "otlp-attrs", "extra resource attributes of the traces, key:value pairs separated by commas (env "+keys.EnvCMPServerOTLPAttrs+")")
	fs.Float64Var(&c.SampleRatio, "otlp-sample-ratio", c.SampleRatio, "share of new traces recorded, 0.0 to 1.0; a request in a trace follows the repo-server's decision (env "+keys.EnvCMPServerOTLPSampleRatio+")")
	return errors.Join(errs...)
}

// Enabled says whether spans are exported.
func (c Config) Enabled() bool { return c.Address != "" }

// Problems are the settings that cannot work, each naming its flag; none
// are checked with tracing off, as Argo CD's server ignores them then.
func (c Config) Problems() []error {
	if !c.Enabled() {
		return nil
	}
	var errs []error
	if strings.Contains(c.Address, "://") {
		errs = append(errs, fmt.Errorf("--otlp-address %q: want host:port (OTLP over gRPC, as argocd-cmp-server), not a URL", c.Address))
	} else if _, port, err := net.SplitHostPort(c.Address); err != nil || port == "" {
		errs = append(errs, fmt.Errorf("--otlp-address %q: want host:port, e.g. otel-collector.monitoring:4317", c.Address))
	}
	if c.SampleRatio < 0 || c.SampleRatio > 1 {
		errs = append(errs, fmt.Errorf("--otlp-sample-ratio %v: want 0.0 to 1.0", c.SampleRatio))
	}
	for _, a := range c.Attrs {
		if k, _, ok := strings.Cut(a, ":"); !ok || strings.TrimSpace(k) == "" || strings.Count(a, ":") != 1 {
			// Argo CD logs such an attribute and drops it.
			errs = append(errs, fmt.Errorf("--otlp-attrs %q: want key:value", a))
		}
	}
	return errs
}

// HeaderNames are the names of the headers, for logs (never their values).
func (c Config) HeaderNames() []string {
	names := make([]string, 0, len(c.Headers))
	for k := range c.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func envError(name, v string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s=%q: %w", name, v, err)
}

// parseBool takes Argo CD's words, true or false in any case.
func parseBool(v string) (bool, error) {
	switch {
	case strings.EqualFold(v, "true"):
		return true, nil
	case strings.EqualFold(v, "false"):
		return false, nil
	}
	return false, errors.New("want true or false")
}

func splitTrim(v string) []string {
	parts := strings.Split(v, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// addHeaders adds "k=v,k2=v2" to m: split on each pair's first "=", since
// values such as base64 credentials hold more. A key given twice is an error.
func addHeaders(m map[string]string, v string) error {
	for _, pair := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return errors.New("want key=value pairs separated by commas")
		}
		if _, dup := m[k]; dup {
			return fmt.Errorf("header %q is given twice", k)
		}
		m[k] = strings.TrimSpace(val)
	}
	return nil
}

// headersFlag is --otlp-headers: the first use replaces the variable's
// headers, later uses add to them (pflag's StringToString, which Argo CD uses).
type headersFlag struct {
	m   map[string]string
	set bool
}

func (f *headersFlag) String() string {
	if f == nil || len(f.m) == 0 {
		return ""
	}
	return fmt.Sprintf("%d headers", len(f.m))
}

func (f *headersFlag) Set(v string) error {
	if !f.set {
		clear(f.m)
		f.set = true
	}
	return addHeaders(f.m, v)
}

// attrsFlag is --otlp-attrs: the first use replaces the variable's list,
// later uses add to it (pflag's StringSlice).
type attrsFlag struct {
	s   *[]string
	set bool
}

func (f *attrsFlag) String() string {
	if f == nil || f.s == nil {
		return ""
	}
	return strings.Join(*f.s, ",")
}

func (f *attrsFlag) Set(v string) error {
	if !f.set {
		*f.s = nil
		f.set = true
	}
	*f.s = append(*f.s, splitTrim(v)...)
	return nil
}
