package injector

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"go.uber.org/zap"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cmp-injector/cmp-injector/certs"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
)

const testPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"repo","labels":{"cmp-injector.io/inject":"true"},
"annotations":{"cmp-injector.io/plugins":"helm"}},"spec":{"containers":[{"name":"argocd-repo-server","image":"x"}]}}`

func TestMutateRefusesBadRequests(t *testing.T) {
	ts := startServer(t, "testdata/catalog.yaml")
	good := podReview("u", "argocd", []byte(testPod), false)
	for _, tc := range []struct {
		name, contentType string
		body              []byte
		code              int
		msg               string
	}{
		{"content type", "text/plain", good, 415, "content type must be application/json"},
		{"oversized", "application/json", bytes.Repeat([]byte(" "), maxReviewBytes+1), 413, "larger than"},
		{"not json", "application/json", []byte("{"), 400, "malformed AdmissionReview"},
		{"v1beta1", "application/json", bytes.Replace(good, []byte("admission.k8s.io/v1"), []byte("admission.k8s.io/v1beta1"), 1), 400, "expected admission.k8s.io/v1 AdmissionReview"},
		{"no kind", "application/json", []byte(`{"request":{"uid":"x"}}`), 400, `got apiVersion "" kind ""`},
		{"no request", "application/json", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), 400, "has no request"},
		{"no uid", "application/json", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}`), 400, "has no uid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := ts.post(t, tc.contentType, tc.body)
			if code != tc.code || !strings.Contains(string(body), tc.msg) {
				t.Errorf("got %d %q, want %d containing %q", code, body, tc.code, tc.msg)
			}
		})
	}
	if code, _ := ts.get(t, ts.webhookURL+"/mutate"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /mutate: %d", code)
	}
	// Still serving after all of that.
	if r := ts.review(t, good); !r.Allowed || r.Patch == nil {
		t.Errorf("good review after bad ones: %+v", r)
	}
	wantSample(t, ts.samples(t), "cmp_injector_bad_requests_total", 5, "code=400")
}

func TestNonCreateAndNonPodPassUntouched(t *testing.T) {
	ts := startServer(t, "testdata/catalog.yaml")
	del := bytes.Replace(podReview("u", "argocd", []byte(testPod), false), []byte(`"CREATE"`), []byte(`"DELETE"`), 1)
	if r := ts.review(t, del); !r.Allowed || r.Patch != nil {
		t.Errorf("DELETE: %+v", r)
	}
	// An UPDATE of a pod the injector never injected is none of its business.
	update := bytes.Replace(podReview("u", "argocd", []byte(testPod), false), []byte(`"CREATE"`), []byte(`"UPDATE"`), 1)
	update = bytes.Replace(update, []byte(`"object":`), []byte(`"oldObject":`+testPod+`,"object":`), 1)
	if r := ts.review(t, update); !r.Allowed || r.Patch != nil {
		t.Errorf("UPDATE: %+v", r)
	}
	svc := bytes.Replace(podReview("u", "argocd", []byte(testPod), false), []byte(`"resource":"pods"`), []byte(`"resource":"services"`), 1)
	if r := ts.review(t, svc); !r.Allowed || r.Patch != nil {
		t.Errorf("services: %+v", r)
	}
	m := ts.samples(t)
	for _, reason := range []string{"not_create", "not_injected", "not_pod"} {
		wantSample(t, m, "cmp_injector_skipped_total", 1, "reason="+reason)
	}
}

// Server-side dry-run gets the same answer but counts only as a request.
func TestDryRunHasNoSideEffects(t *testing.T) {
	ts := startServer(t, "testdata/catalog.yaml")
	if r := ts.review(t, podReview("u", "argocd", []byte(testPod), true)); !r.Allowed || r.Patch == nil {
		t.Fatalf("dry run not injected: %+v", r)
	}
	m := ts.samples(t)
	if m.Has("cmp_injector_injected_total") {
		t.Errorf("dry run counted as an injection: %v", m.Sum("cmp_injector_injected_total"))
	}
	wantSample(t, m, "cmp_injector_requests_total", 1, "decision=injected", "dry_run=true")
	ts.review(t, podReview("u2", "argocd", []byte(testPod), false))
	wantSample(t, ts.samples(t), "cmp_injector_injected_total", 1, "namespace=argocd")
}

// The kubelet probes the metrics port; the webhook port keeps /readyz for
// doctor's check of an out-of-cluster injector, and nothing else but /mutate.
func TestMetricsNamesAndHealthOnBothListeners(t *testing.T) {
	ts := startServer(t, "testdata/catalog.yaml")
	for _, u := range []string{ts.metricsURL + "/healthz", ts.metricsURL + "/readyz", ts.webhookURL + "/readyz"} {
		if code, body := ts.get(t, u); code != 200 {
			t.Errorf("%s: %d %s", u, code, body)
		}
	}
	for _, p := range []string{"/metrics", "/healthz"} {
		if code, _ := ts.get(t, ts.webhookURL+p); code != http.StatusNotFound {
			t.Errorf("%s must not be on the webhook listener (got %d)", p, code)
		}
	}
	m := ts.samples(t)
	wantSample(t, m, "cmp_injector_catalog_info", 1, "revision=2026-11-21.1")
	wantSample(t, m, "cmp_injector_catalog_reloads_total", 1)
	wantSample(t, m, "cmp_injector_catalog_last_reload_success", 1)
	wantSample(t, m, "cmp_injector_certificate_reloads_total", 1)
	if exp := m.Sum("cmp_injector_certificate_expiry_timestamp_seconds"); exp < float64(time.Now().Unix()) {
		t.Errorf("certificate expiry %v is not in the future", exp)
	}
	if !m.Has("process_resident_memory_bytes") {
		t.Error("no process metrics")
	}
}

func TestRefusesOldTLS(t *testing.T) {
	ts := startServer(t, "testdata/catalog.yaml")
	addr := strings.TrimPrefix(ts.webhookURL, "https://")
	// MinVersion too: Go clients refuse TLS 1.1 themselves by default, and the
	// handshake would then fail without reaching the server.
	_, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}) //nolint:gosec // the point of the test
	// The server's alert, not any error: protocol_version (70).
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "remote error" || !strings.Contains(err.Error(), "tls: protocol version not supported") {
		t.Fatalf("TLS 1.1 handshake: %v, want the server's protocol_version alert", err)
	}
	// The control: the same client with TLS 1.2 allowed gets through.
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS12}) //nolint:gosec // the point of the test
	if err != nil {
		t.Fatalf("TLS 1.2 handshake: %v", err)
	}
	conn.Close()
}

// Start-up fails at once, naming each problem, without a valid catalog or
// certificate: a server that kept running would only look started.
func TestStartFailsWithoutCatalogOrCertificate(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("plugins: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		catalog, cert string
		want          []string
	}{
		"no catalog":      {filepath.Join(dir, "missing.yaml"), "", []string{"catalog " + filepath.Join(dir, "missing.yaml"), "no such file"}},
		"bad catalog":     {bad, "", []string{"catalog " + bad}},
		"no certificate":  {"testdata/catalog.yaml", filepath.Join(dir, "none.crt"), []string{"serving certificate", "none.crt"}},
		"neither of both": {bad, filepath.Join(dir, "none.crt"), []string{"catalog " + bad, "serving certificate"}},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := Options{CatalogFile: tc.catalog, CertFile: tc.cert, KeyFile: tc.cert, Poll: time.Second}
			if tc.cert == "" {
				cfg.CertFile, cfg.KeyFile = writeCert(t)
			}
			hl, _ := net.Listen("tcp", "127.0.0.1:0")
			ml, _ := net.Listen("tcp", "127.0.0.1:0")
			done := make(chan error, 1)
			go func() { done <- New(cfg, zap.NewNop()).Serve(t.Context(), hl, ml) }()
			select {
			case err := <-done:
				for _, w := range tc.want {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Errorf("error %v lacks %q", err, w)
					}
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Serve kept running")
			}
		})
	}
}

// The handler itself refuses reviews while no catalog is loaded (fail closed),
// should it ever be served before one is.
func TestNoCatalogDenies(t *testing.T) {
	s := New(Options{CatalogFile: filepath.Join(t.TempDir(), "none.yaml")}, zap.NewNop())
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/mutate", bytes.NewReader(podReview("u", "argocd", []byte(testPod), false)))
	req.Header.Set("Content-Type", "application/json")
	s.WebhookHandler().ServeHTTP(rec, req)
	var r admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || r.Response == nil {
		t.Fatalf("%v: %s", err, rec.Body.String())
	}
	if r.Response.Allowed || !strings.Contains(r.Response.Result.Message, "no valid plugin catalog") {
		t.Errorf("review without catalog: %+v", r.Response.Result)
	}
}

func writeCert(t *testing.T) (certFile, keyFile string) {
	dir := t.TempDir()
	b, err := certs.Generate(certs.Options{Service: "s", Namespace: "n", Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
}

// A rotated key pair is served without a restart.
func TestCertificateReload(t *testing.T) {
	ts := startServer(t, "testdata/catalog.yaml")
	b, err := certs.Generate(certs.Options{Service: "cmp-injector", Namespace: "cmp-injector",
		IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Validity: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// Key first, then cert: in between the pair mismatches and must be ignored.
	if err := os.WriteFile(filepath.Join(ts.certDir, "tls.key"), b.Key, 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(120 * time.Millisecond)
	if code, _ := ts.get(t, ts.webhookURL+"/readyz"); code != 200 {
		t.Fatal("half-rotated pair broke the old one")
	}
	if err := os.WriteFile(filepath.Join(ts.certDir, "tls.crt"), b.Cert, 0o644); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.CA)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	defer client.CloseIdleConnections()
	eventually(t, func() bool {
		resp, err := client.Get(ts.webhookURL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	m := ts.samples(t)
	wantSample(t, m, "cmp_injector_certificate_reloads_total", 2)
	wantSample(t, m, "cmp_injector_certificate_reload_errors_total", 1)
}

func TestRecovererAnswers500(t *testing.T) {
	s := New(Options{}, zap.NewNop())
	h := s.recoverer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mutate", nil))
	if rec.Code != 500 {
		t.Errorf("code %d", rec.Code)
	}
}

// On shutdown the server turns not-ready first, then stops.
func TestGracefulDrain(t *testing.T) {
	ts := startServer(t, "testdata/catalog.yaml")
	ts.srv.cfg.ShutdownDelay = 300 * time.Millisecond
	stopped := make(chan struct{})
	go func() { ts.stop(); close(stopped) }()
	eventually(t, func() bool { return ts.srv.Ready() != nil })
	if code, _ := ts.get(t, ts.metricsURL+"/readyz"); code != 503 {
		t.Errorf("readyz while draining: %d", code)
	}
	<-stopped
}

func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The attack run's review: a 526 KB plugins annotation of empty entries. The
// answer (and what is logged) must stay a few KB, not the 30.8 MB it was.
func TestHugeAnnotationDenialIsSmall(t *testing.T) {
	ts := startServer(t, "testdata/catalog.yaml")
	pod := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{%q:"true"},"annotations":{%q:%q}},"spec":{"containers":[{"name":"argocd-repo-server","image":"i"}]}}`,
		keys.InjectLabel, keys.PluginsAnnotation, strings.Repeat(",", 526_000))
	code, out := ts.post(t, "application/json", podReview("u1", "argocd", []byte(pod), false))
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	t.Logf("denial of a %d-byte review: %d bytes", len(pod), len(out))
	if len(out) > 4<<10 {
		t.Errorf("the answer is %d bytes", len(out))
	}
	if !strings.Contains(string(out), "at most 4096 bytes") {
		t.Errorf("the answer does not name the limit: %.300s", out)
	}
}

// The namespace label of injections is bounded by the catalog's keys: pods in
// any number of namespaces enabled through "*" make one series.
func TestInjectedNamespaceLabelIsBounded(t *testing.T) {
	b, err := os.ReadFile("testdata/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cat := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(cat, []byte(strings.Replace(string(b), "namespaces:\n", "namespaces:\n  \"*\": [helm]\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, cat)
	for i := 0; i < 50; i++ {
		if r := ts.review(t, podReview(fmt.Sprint("u", i), fmt.Sprint("team-", i+100), []byte(testPod), false)); !r.Allowed || r.Patch == nil {
			t.Fatalf("not injected: %+v", r)
		}
	}
	ts.review(t, podReview("named", "argocd", []byte(testPod), false))
	series := map[string]float64{}
	for k, v := range ts.samples(t) {
		if strings.HasPrefix(k, "cmp_injector_injected_total{") {
			series[k] = v
		}
	}
	want := map[string]float64{`cmp_injector_injected_total{namespace="*"}`: 50, `cmp_injector_injected_total{namespace="argocd"}`: 1}
	if !reflect.DeepEqual(series, want) {
		t.Errorf("series %v, want %v", series, want)
	}
}

// A body that ends before its Content-Length or has a bad chunk is a 400 that
// says so, not a 413 about the size limit.
func TestUnreadableBodyIs400(t *testing.T) {
	ts := startServer(t, "testdata/catalog.yaml")
	host := strings.TrimPrefix(ts.webhookURL, "https://")
	for name, req := range map[string]string{
		"bad chunk":  "POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
		"short body": "POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"apiVersion\"",
	} {
		t.Run(name, func(t *testing.T) {
			conn, err := tls.Dial("tcp", host, ts.client.Transport.(*http.Transport).TLSClientConfig)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.Write([]byte(req)); err != nil {
				t.Fatal(err)
			}
			// The short body ends when the client stops sending.
			_ = conn.CloseWrite()
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "request body unreadable") {
				t.Errorf("got %d %q, want 400 naming the unreadable body", resp.StatusCode, b)
			}
		})
	}
}

// When every slot holds a connection that has sent a review (an API server's
// keep-alive connections), more wait to be accepted instead of each holding
// memory; the gauge never passes the cap, and a freed slot lets the next one
// in. (Connections that sent no review give up their slot instead:
// TestReviewsAnsweredThroughConnectionFlood.)
func TestWebhookConnectionsAreCapped(t *testing.T) {
	ts := startServerWith(t, "testdata/catalog.yaml", func(c *Options) { c.MaxConnections = 2 })
	host := strings.TrimPrefix(ts.webhookURL, "https://")
	var reviewers []*http.Client
	for i := 0; i < 2; i++ {
		c := &http.Client{Timeout: 10 * time.Second, Transport: ts.client.Transport.(*http.Transport).Clone()}
		t.Cleanup(c.CloseIdleConnections)
		resp, err := c.Post(ts.webhookURL+"/mutate", "application/json", bytes.NewReader(podReview("u", "argocd", []byte(testPod), false)))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		reviewers = append(reviewers, c)
	}
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// From another address: 127.0.0.1 holds its cap of two.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	for i := 0; i < 3; i++ {
		c, err := d.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	// waitFor waits until the sum of metric's samples (with labels, as
	// servingtest reads them) is want.
	waitFor := func(want float64, metric string, labels ...string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ts.samples(t).Sum(metric, labels...) != want; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s %v is %v, want %v", metric, labels, ts.samples(t).Sum(metric, labels...), want)
			}
		}
	}
	// Both slots are held by the reviewers' keep-alive connections, idle.
	// Each of the three connections from the other address is admitted by
	// evicting one: the first the reviewer idle the longest (which of the two
	// depends on when the server saw each go idle, so the test counts, not
	// names), each later one the one before it, still on probation. The cap
	// holds.
	waitFor(1, "cmp_injector_webhook_connections_dropped_total", "reason=evicted_idle")
	waitFor(2, "cmp_injector_webhook_connections_dropped_total", "reason=evicted")
	waitFor(2, "cmp_injector_webhook_open_connections")
	for _, r := range reviewers {
		r.CloseIdleConnections()
	}
	for _, c := range conns {
		c.Close()
	}
	waitFor(0, "cmp_injector_webhook_open_connections")
	// Still answering reviews.
	if r := ts.review(t, podReview("u", "argocd", []byte(testPod), false)); !r.Allowed {
		t.Errorf("review after the connection storm: %+v", r)
	}
}

// The metrics port closes idle keep-alive connections (it had only a header
// timeout, so they stayed open forever).
func TestMetricsIdleConnectionsClose(t *testing.T) {
	ts := startServerWith(t, "testdata/catalog.yaml", func(c *Options) { c.MetricsTimeouts = serving.Timeouts{Idle: 100 * time.Millisecond} })
	servingtest.ExpectIdleClose(t, strings.TrimPrefix(ts.metricsURL, "http://"), 5*time.Second)
}

// UPDATEs of an injected pod: an image the catalog does not allow is denied,
// unless the injector's own service account sends it; other changes pass.
func TestUpdateReviews(t *testing.T) {
	const self = "system:serviceaccount:cmp-injector:cmp-injector"
	ts := startServerWith(t, "testdata/catalog.yaml", func(c *Options) { c.TrustedUsers = []string{self} })
	r := ts.review(t, podReview("create", "argocd", []byte(testPod), false))
	if r.Patch == nil {
		t.Fatalf("not injected: %+v", r)
	}
	stored, err := jsonpatch.DecodePatch(r.Patch)
	if err != nil {
		t.Fatal(err)
	}
	old, err := stored.Apply([]byte(testPod))
	if err != nil {
		t.Fatal(err)
	}
	evil := bytes.Replace(old, []byte(`"image":"alpine/helm:3.16.2"`), []byte(`"image":"evil/anything:1"`), 1)
	if bytes.Equal(evil, old) {
		t.Fatalf("no helm image in %s", old)
	}
	update := func(uid, user string, newPod []byte) *admissionv1.AdmissionResponse {
		var rev admissionv1.AdmissionReview
		if err := json.Unmarshal(podReview(uid, "argocd", newPod, false), &rev); err != nil {
			t.Fatal(err)
		}
		rev.Request.Operation = admissionv1.Update
		rev.Request.OldObject = runtime.RawExtension{Raw: old}
		rev.Request.UserInfo.Username = user
		b, _ := json.Marshal(&rev)
		return ts.review(t, b)
	}
	if r := update("u1", "mallory", evil); r.Allowed || !strings.Contains(r.Result.Message, `image "evil/anything:1" of container "cmp-helm" is not allowed`) {
		t.Errorf("evil image admitted: %+v", r.Result)
	}
	if r := update("u2", self, evil); !r.Allowed || r.Patch != nil {
		t.Errorf("the injector's own update refused: %+v", r.Result)
	}
	relabelled := withLabel(t, old, "team", "a")
	if r := update("u3", "mallory", relabelled); !r.Allowed || r.Patch != nil {
		t.Errorf("a label change refused: %+v", r.Result)
	}
	m := ts.samples(t)
	wantSample(t, m, "cmp_injector_denied_total", 1, "reason=image_not_allowed")
	wantSample(t, m, "cmp_injector_skipped_total", 1, "reason=trusted_user")
	wantSample(t, m, "cmp_injector_skipped_total", 1, "reason=owned_unchanged")
}

// withLabel is pod (JSON) with one more label, and fails unless that changed
// the pod: an edit that matches nothing would make a check of "other changes
// pass" pass without testing anything.
func withLabel(t *testing.T, pod []byte, key, value string) []byte {
	t.Helper()
	var p corev1.Pod
	if err := json.Unmarshal(pod, &p); err != nil {
		t.Fatal(err)
	}
	if _, has := p.Labels[key]; has || p.Labels[keys.InjectLabel] != keys.EnabledValue {
		t.Fatalf("pod labels %v: want %s unset and the inject label kept", p.Labels, key)
	}
	p.Labels[key] = value
	out, err := json.Marshal(&p)
	if err != nil {
		t.Fatal(err)
	}
	var back corev1.Pod
	if err := json.Unmarshal(out, &back); err != nil || back.Labels[key] != value || bytes.Equal(out, pod) {
		t.Fatalf("relabelling changed nothing: %s", out)
	}
	return out
}
