package injector

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
)

// BenchmarkHandler measures one review through the HTTP handler (no network):
// decode, decide, patch, encode, metrics and logging, for the small test pod
// and for a 50-container pod whose containers carry env, mounts and probes.
func BenchmarkHandler(b *testing.B) {
	s := New(Options{CatalogFile: "testdata/catalog.yaml"}, zap.NewNop())
	if _, err := s.catalog.Reload(); err != nil {
		b.Fatal(err)
	}
	h := s.WebhookHandler()
	for _, tc := range []struct {
		name string
		pod  []byte
	}{{"pod", []byte(testPod)}, {"pod50", bigPod(50)}} {
		b.Run(tc.name, func(b *testing.B) {
			body := podReview("u", "argocd", tc.pod, false)
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/mutate", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != 200 {
					b.Fatal(rec.Code)
				}
			}
		})
	}
}

// bigPod is the test pod with n containers, each with env, mounts, probes and
// resources, as a repo-server's container has.
func bigPod(n int) []byte {
	var ctrs []string
	for i := range n {
		name := "argocd-repo-server"
		if i > 0 {
			name = fmt.Sprintf("worker-%d", i)
		}
		var env []string
		for j := range 12 {
			env = append(env, fmt.Sprintf(`{"name":"SETTING_%d","valueFrom":{"configMapKeyRef":{"name":"argocd-cmd-params-cm","key":"reposerver.setting.%d","optional":true}}}`, j, j))
		}
		ctrs = append(ctrs, fmt.Sprintf(`{"name":%q,"image":"quay.io/argoproj/argocd:v3.6.1","args":["/usr/local/bin/argocd-repo-server"],`+
			`"env":[%s],"volumeMounts":[{"name":"tmp","mountPath":"/tmp"},{"name":"gpg-keys","mountPath":"/app/config/gpg/source"},{"name":"plugins","mountPath":"/home/argocd/cmp-server/plugins"}],`+
			`"readinessProbe":{"httpGet":{"path":"/healthz?full=true","port":8084},"periodSeconds":30},"livenessProbe":{"httpGet":{"path":"/healthz","port":8084}},`+
			`"resources":{"requests":{"cpu":"250m","memory":"256Mi"}},"securityContext":{"runAsNonRoot":true,"readOnlyRootFilesystem":true,"capabilities":{"drop":["ALL"]}}}`,
			name, strings.Join(env, ",")))
	}
	return []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"repo","labels":{"cmp-injector.io/inject":"true"},` +
		`"annotations":{"cmp-injector.io/plugins":"helm"}},"spec":{"volumes":[{"name":"tmp","emptyDir":{}},{"name":"gpg-keys","configMap":{"name":"argocd-gpg-keys-cm"}},{"name":"plugins","emptyDir":{}}],` +
		`"containers":[` + strings.Join(ctrs, ",") + `]}}`)
}

// TestLoad posts reviews over HTTPS on loopback at 1, 16 and 64 concurrent
// clients for a few seconds each and prints throughput and latency. It only
// measures (no thresholds); run it with CMP_LOAD_TEST=1 go test -run TestLoad -v ./injector/.
func TestLoad(t *testing.T) {
	if os.Getenv("CMP_LOAD_TEST") != "1" {
		t.Skip("set CMP_LOAD_TEST=1 to run the load test")
	}
	per := 3 * time.Second
	if d, err := time.ParseDuration(os.Getenv("CMP_LOAD_DURATION")); err == nil {
		per = d
	}
	ts := startServer(t, "testdata/catalog.yaml")
	body := podReview("u", "argocd", []byte(testPod), false)
	for _, clients := range []int{1, 16, 64} {
		lat := make([][]time.Duration, clients)
		var wg sync.WaitGroup
		var failures sync.Map
		start := time.Now()
		deadline := start.Add(per)
		for c := 0; c < clients; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				for time.Now().Before(deadline) {
					t0 := time.Now()
					resp, err := ts.client.Post(ts.webhookURL+"/mutate", "application/json", bytes.NewReader(body))
					if err != nil {
						failures.Store(err.Error(), true)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						failures.Store(resp.Status, true)
						return
					}
					lat[c] = append(lat[c], time.Since(t0))
				}
			}(c)
		}
		wg.Wait()
		elapsed := time.Since(start)
		failures.Range(func(k, _ any) bool { t.Errorf("%d clients: %v", clients, k); return true })
		var all []time.Duration
		for _, l := range lat {
			all = append(all, l...)
		}
		sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
		if len(all) == 0 {
			t.Fatalf("%d clients: no successful request", clients)
		}
		q := func(p float64) time.Duration { return all[int(p*float64(len(all)-1))] }
		fmt.Printf("load: %2d clients: %6d reviews in %.1fs = %7.0f reviews/s, p50 %v, p99 %v\n",
			clients, len(all), elapsed.Seconds(), float64(len(all))/elapsed.Seconds(),
			q(0.50).Round(time.Microsecond), q(0.99).Round(time.Microsecond))
	}
	fmt.Printf("load: peak RSS of the test process (server and clients): %.0f MiB\n", servingtest.PeakRSSMiB(os.Getpid()))
}
