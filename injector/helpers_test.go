package injector

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"go.uber.org/zap"

	"github.com/cmp-injector/cmp-injector/certs"
	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
)

// testServer is a real webhook on loopback: HTTPS with a freshly issued
// certificate, plain HTTP for metrics.
type testServer struct {
	srv        *Server
	webhookURL string
	metricsURL string
	client     *http.Client
	certDir    string
	stop       func()
}

func startServer(t testing.TB, catalogFile string) *testServer {
	t.Helper()
	return startServerWith(t, catalogFile, nil)
}

// startServerWith is startServer with a chance to change the Options.
func startServerWith(t testing.TB, catalogFile string, configure func(*Options)) *testServer {
	t.Helper()
	dir := t.TempDir()
	b, err := certs.Generate(certs.Options{Service: "cmp-injector", Namespace: "cmp-injector",
		IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	cfg := Options{CatalogFile: catalogFile, CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"),
		Poll: 50 * time.Millisecond, ShutdownTimeout: 5 * time.Second}
	if configure != nil {
		configure(&cfg)
	}
	log := zap.NewNop()
	if os.Getenv("CMP_TEST_LOG") != "" {
		log = zap.NewExample()
	}
	s := New(cfg, log)
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, hl, ml) }()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.CA)
	ts := &testServer{
		srv:        s,
		webhookURL: "https://" + hl.Addr().String(),
		metricsURL: "http://" + ml.Addr().String(),
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, MaxIdleConnsPerHost: 64}},
		certDir: dir,
	}
	var once sync.Once
	ts.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("server stopped with %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("server did not stop")
			}
			ts.client.CloseIdleConnections()
		})
	}
	t.Cleanup(ts.stop)
	for deadline := time.Now().Add(5 * time.Second); !s.certs.Loaded(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("server did not load its certificate")
		}
	}
	return ts
}

// podReview wraps a pod's JSON in the review the API server sends on CREATE.
func podReview(uid, namespace string, pod []byte, dryRun bool) []byte {
	r := admissionv1.AdmissionReview{Request: &admissionv1.AdmissionRequest{
		UID:       types.UID(uid),
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Namespace: namespace,
		Operation: admissionv1.Create,
		Object:    runtime.RawExtension{Raw: pod},
		DryRun:    &dryRun,
	}}
	r.SetGroupVersionKind(admissionGVK)
	b, _ := json.Marshal(&r)
	return b
}

// post sends a body to /mutate and returns status and body.
func (ts *testServer) post(t testing.TB, contentType string, body []byte) (int, []byte) {
	t.Helper()
	resp, err := ts.client.Post(ts.webhookURL+"/mutate", contentType, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

// review posts an AdmissionReview and decodes the answer.
func (ts *testServer) review(t testing.TB, body []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	code, out := ts.post(t, "application/json", body)
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, out)
	}
	var r admissionv1.AdmissionReview
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	if r.Response == nil || r.GroupVersionKind() != admissionGVK {
		t.Fatalf("bad review answer: %s", out)
	}
	return r.Response
}

func (ts *testServer) get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := ts.client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// samples scrapes /metrics and parses it with Prometheus's own parser.
func (ts *testServer) samples(t testing.TB) servingtest.Samples {
	t.Helper()
	_, body := ts.get(t, ts.metricsURL+"/metrics")
	m, err := servingtest.ParseMetrics(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics is not a valid exposition: %v", err)
	}
	return m
}

// wantSample checks the sum of metric name's samples with labels (name=value).
func wantSample(t testing.TB, m servingtest.Samples, name string, want float64, labels ...string) {
	t.Helper()
	if got := m.Sum(name, labels...); got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}
