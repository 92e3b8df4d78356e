package tracing

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// ServiceName is the service.name of cmp-server's spans: argocd-cmp-server's,
// so that a query or dashboard written for Argo CD's sidecars finds ours.
const ServiceName = "argocd-cmp-server"

// Tracer is a running exporter: the provider a server's spans come from and
// the propagator that reads the repo-server's trace context.
type Tracer struct {
	Provider   *sdktrace.TracerProvider
	Propagator propagation.TextMapPropagator
}

// Start builds the exporter c describes (nil with tracing off). The
// connection is made lazily: a collector that is down costs dropped spans,
// never a request.
func Start(ctx context.Context, c Config, version string) (*Tracer, error) {
	if !c.Enabled() {
		return nil, nil
	}
	if err := errors.Join(c.Problems()...); err != nil {
		return nil, err
	}
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(c.Address)}
	if c.Insecure {
		// Credentials rather than WithInsecure, as Argo CD's tracer: the
		// exporter would otherwise prefer TLS from OTEL_EXPORTER_OTLP_* files.
		opts = append(opts, otlptracegrpc.WithTLSCredentials(insecure.NewCredentials()))
	} else {
		creds, err := tlsCredentials()
		if err != nil {
			return nil, err
		}
		opts = append(opts, otlptracegrpc.WithTLSCredentials(creds))
	}
	if len(c.Headers) > 0 {
		opts = append(opts, otlptracegrpc.WithHeaders(c.Headers))
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter: %w", err)
	}
	attrs := []attribute.KeyValue{
		attribute.String("service.name", ServiceName),
		attribute.String("service.version", version),
	}
	for _, a := range c.Attrs {
		k, v, _ := strings.Cut(a, ":")
		attrs = append(attrs, attribute.String(strings.TrimSpace(k), strings.TrimSpace(v)))
	}
	// No detectors: the host's and process's attributes would carry the
	// sidecar's command line, which may name secrets' paths.
	res := resource.NewSchemaless(attrs...)
	return &Tracer{
		Provider: sdktrace.NewTracerProvider(
			sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.SampleRatio))),
			sdktrace.WithResource(res),
			sdktrace.WithBatcher(exp),
		),
		// W3C trace context, the one propagator Argo CD's components use.
		Propagator: propagation.TraceContext{},
	}, nil
}

// Shutdown sends the spans still batched, within ctx.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.Provider.Shutdown(ctx)
}

// tlsCredentials are the collector's TLS settings from the exporter's own
// variables, read as Argo CD's tracer reads them (the signal's name wins) but
// strictly: a CA file without a certificate, or half a client pair, is an
// error rather than a connection that silently is not what was asked for.
func tlsCredentials() (credentials.TransportCredentials, error) {
	env := func(traces, generic string) string {
		if v := strings.TrimSpace(os.Getenv(traces)); v != "" {
			return v
		}
		return strings.TrimSpace(os.Getenv(generic))
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca := env(keys.EnvOTLPTracesCertificate, keys.EnvOTLPCertificate); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("OTLP collector CA: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("OTLP collector CA %s: no PEM certificate in it", ca)
		}
	}
	// The pair is read as one: the signal's if both are set, else the generic one.
	get := func(name string) string { return strings.TrimSpace(os.Getenv(name)) }
	certFile, keyFile := get(keys.EnvOTLPTracesClientCertificate), get(keys.EnvOTLPTracesClientKey)
	if certFile == "" || keyFile == "" {
		gc, gk := get(keys.EnvOTLPClientCertificate), get(keys.EnvOTLPClientKey)
		if certFile != "" || keyFile != "" || gc == "" != (gk == "") {
			return nil, errors.New("OTLP client certificate and key must both be set (" + keys.EnvOTLPClientCertificate + " and " + keys.EnvOTLPClientKey + ", or their TRACES_ forms)")
		}
		certFile, keyFile = gc, gk
	}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("OTLP client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return credentials.NewTLS(cfg), nil
}
