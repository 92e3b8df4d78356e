package tracing

import (
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/cmpserver/tracing/otlptest"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
)

func parse(t *testing.T, env map[string]string, args ...string) (Config, error) {
	t.Helper()
	for _, k := range []string{keys.EnvCMPServerOTLPAddress, keys.EnvCMPServerOTLPInsecure, keys.EnvCMPServerOTLPHeaders,
		keys.EnvCMPServerOTLPAttrs, keys.EnvCMPServerOTLPSampleRatio} {
		t.Setenv(k, env[k])
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var c Config
	if err := Flags(fs, &c); err != nil {
		return c, err
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	return c, errors.Join(c.Problems()...)
}

// The defaults and the env forms are argocd-cmp-server's.
func TestConfigFromEnvAndFlags(t *testing.T) {
	c, err := parse(t, nil)
	if err != nil || c.Enabled() || !c.Insecure || c.SampleRatio != 1 || len(c.Headers) != 0 || len(c.Attrs) != 0 {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	c, err = parse(t, map[string]string{
		keys.EnvCMPServerOTLPAddress:     "otel-collector.monitoring:4317",
		keys.EnvCMPServerOTLPInsecure:    "FALSE",
		keys.EnvCMPServerOTLPHeaders:     "authorization=Basic dXNlcjpwYXNz==, x-tenant = a",
		keys.EnvCMPServerOTLPAttrs:       "cluster:prod, team:platform",
		keys.EnvCMPServerOTLPSampleRatio: "0.25",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Enabled() || c.Insecure || c.SampleRatio != 0.25 || c.Headers["authorization"] != "Basic dXNlcjpwYXNz==" || c.Headers["x-tenant"] != "a" ||
		strings.Join(c.Attrs, ",") != "cluster:prod,team:platform" {
		t.Errorf("from env: %+v", c)
	}
	// A flag replaces its variable's value, and repeats add to it (pflag's
	// StringToString and StringSlice, as Argo CD's flags).
	c, err = parse(t, map[string]string{keys.EnvCMPServerOTLPHeaders: "a=1", keys.EnvCMPServerOTLPAttrs: "x:1"},
		"--otlp-address=c:4317", "--otlp-headers=b=2", "--otlp-headers=c=3", "--otlp-attrs=y:2", "--otlp-insecure=false")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Headers["a"]; ok || c.Headers["b"] != "2" || c.Headers["c"] != "3" || strings.Join(c.Attrs, ",") != "y:2" || c.Insecure {
		t.Errorf("flags over env: %+v", c)
	}
	if got := strings.Join(c.HeaderNames(), ","); got != "b,c" {
		t.Errorf("HeaderNames = %q", got)
	}
}

// Where Argo CD logs a bad value and goes on without it, the server refuses
// to start, naming the setting (and never a header's value).
func TestConfigProblems(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{keys.EnvCMPServerOTLPInsecure: "yes"}, nil, keys.EnvCMPServerOTLPInsecure + `="yes": want true or false`},
		{map[string]string{keys.EnvCMPServerOTLPSampleRatio: "half"}, nil, keys.EnvCMPServerOTLPSampleRatio},
		{map[string]string{keys.EnvCMPServerOTLPHeaders: "token-s3cret"}, nil, keys.EnvCMPServerOTLPHeaders + ": want key=value"},
		{map[string]string{keys.EnvCMPServerOTLPHeaders: "a=1,a=2"}, nil, `header "a" is given twice`},
		{nil, []string{"--otlp-address=http://collector:4317"}, "not a URL"},
		{nil, []string{"--otlp-address=collector"}, "want host:port"},
		{nil, []string{"--otlp-address=c:4317", "--otlp-sample-ratio=1.5"}, "--otlp-sample-ratio 1.5: want 0.0 to 1.0"},
		{nil, []string{"--otlp-address=c:4317", "--otlp-attrs=cluster=prod"}, `--otlp-attrs "cluster=prod": want key:value`},
	} {
		_, err := parse(t, tc.env, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: err %v, want %q", tc.env, tc.args, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("the error quotes a header's value: %v", err)
		}
	}
	// Off, the other settings are not checked, as Argo CD's server ignores them.
	if _, err := parse(t, nil, "--otlp-sample-ratio=7"); err != nil {
		t.Errorf("tracing off: %v", err)
	}
}

// The exporter speaks OTLP to a real receiver: resource, headers, attributes.
func TestExportToReceiver(t *testing.T) {
	recv, err := otlptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Stop()
	tr, err := Start(context.Background(), Config{Address: recv.Addr, Insecure: true, SampleRatio: 1,
		Headers: map[string]string{"x-collector-token": "t0k"}, Attrs: []string{"cluster:prod"}}, "v9.9.9")
	if err != nil {
		t.Fatal(err)
	}
	ctx, root := tr.Provider.Tracer("test").Start(context.Background(), "root")
	_, child := Begin(ctx, SpanCommand)
	child.Set(AttrPhase.String("generate"), AttrExitCode.Int(0))
	child.End(errors.New("exit status 3"))
	root.End()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !servingtest.WaitUntil(5*time.Second, func() bool { return len(recv.Spans()) == 2 }) {
		t.Fatalf("received %d spans, want 2", len(recv.Spans()))
	}
	for _, s := range recv.Spans() {
		if s.Service != ServiceName {
			t.Errorf("span %s service %q", s.Name, s.Service)
		}
		if s.Name == SpanCommand && (s.Attributes[string(AttrPhase)] != "generate" || s.Attributes[string(AttrExitCode)] != "0" || s.StatusError != "exit status 3") {
			t.Errorf("command span: %+v", s)
		}
	}
	if h := recv.Headers(); len(h) == 0 || strings.Join(h[0].Get("x-collector-token"), "") != "t0k" {
		t.Errorf("export headers %v", h)
	}
	// Off: nothing is built.
	if tr, err := Start(context.Background(), Config{}, "v"); tr != nil || err != nil {
		t.Errorf("Start off = %v, %v", tr, err)
	}
}

// TLS settings that cannot work fail at start, not at the first export.
func TestTLSProblems(t *testing.T) {
	t.Setenv(keys.EnvOTLPCertificate, "/nonexistent/ca.pem")
	if _, err := Start(context.Background(), Config{Address: "c:4317", SampleRatio: 1}, "v"); err == nil || !strings.Contains(err.Error(), "OTLP collector CA") {
		t.Errorf("missing CA file: %v", err)
	}
	t.Setenv(keys.EnvOTLPCertificate, "")
	t.Setenv(keys.EnvOTLPClientCertificate, "/tmp/cert.pem")
	if _, err := Start(context.Background(), Config{Address: "c:4317", SampleRatio: 1}, "v"); err == nil || !strings.Contains(err.Error(), "must both be set") {
		t.Errorf("half a client pair: %v", err)
	}
}

// BenchmarkBeginUntraced is a phase's cost in a request that is not traced.
func BenchmarkBeginUntraced(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_, span := Begin(ctx, SpanCommand)
		if span.Recording() {
			span.Set(AttrPhase.String("generate"))
		}
		span.End(nil)
	}
}
