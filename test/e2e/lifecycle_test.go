package e2e

import (
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

func countNames(names []string, want string) int {
	n := 0
	for _, s := range names {
		if s == want {
			n++
		}
	}
	return n
}

// otherWebhook is a second mutating webhook that labels every pod it sees, so the
// apiserver reinvokes ours (reinvocationPolicy IfNeeded) after it.
func otherWebhook(t *testing.T) (url, caBundle string, calls *atomic.Int64) {
	t.Helper()
	return patchingWebhook(t, []byte(`[{"op":"add","path":"/metadata/labels/other-webhook","value":"was-here"}]`))
}

// patchingWebhook serves a mutating webhook on loopback that allows every
// review with patch (a JSON patch); it returns its URL, CA bundle (base64) and
// a count of its calls.
func patchingWebhook(t *testing.T, patch []byte) (url, caBundle string, calls *atomic.Int64) {
	t.Helper()
	dir := t.TempDir()
	if err := harness.MakeCerts(env.bins["cmp-injector"], dir); err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	calls = &atomic.Int64{}
	srv := &http.Server{
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			review := &admissionv1.AdmissionReview{}
			if err := json.NewDecoder(r.Body).Decode(review); err != nil || review.Request == nil {
				http.Error(w, "bad review", http.StatusBadRequest)
				return
			}
			pt := admissionv1.PatchTypeJSONPatch
			review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true,
				Patch: patch, PatchType: &pt}
			review.Request = nil
			_ = json.NewEncoder(w).Encode(review)
		}),
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return fmt.Sprintf("https://%s/mutate", l.Addr()), base64.StdEncoding.EncodeToString(ca), calls
}

func TestReinvocation(t *testing.T) {
	in := startInjector(t, catalogFor(t, true, map[string][]string{"*": {"helm", "kustomize"}}))
	c := env.cp.Client()
	ns := newNamespace(t, "reinv", enabledNS)
	waitActive(t, ns)

	url, ca, calls := otherWebhook(t)
	// Named to sort after ours: the apiserver calls configurations in name order.
	other := map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
		"metadata": map[string]any{"name": "zz-e2e-other"},
		"webhooks": []any{map[string]any{
			"name": "other.e2e.cmp-injector.io", "admissionReviewVersions": []any{"v1"},
			"sideEffects": "None", "failurePolicy": "Fail",
			"clientConfig":   map[string]any{"url": url, "caBundle": ca},
			"objectSelector": map[string]any{"matchLabels": map[string]any{keys.InjectLabel: keys.EnabledValue}},
			"rules": []any{map[string]any{"apiGroups": []any{""}, "apiVersions": []any{"v1"},
				"operations": []any{"CREATE"}, "resources": []any{"pods"}}},
		}},
	}
	if err := c.Apply(webhookPath, "zz-e2e-other", other); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(webhookPath + "/zz-e2e-other") })
	if err := harness.Eventually(30*time.Second, 20*time.Millisecond, func() (bool, error) {
		pod := loadPod(t, "repo-server-pod.yaml")
		got, err := c.CreatePod(ns, pod, true)
		if err != nil {
			return false, err
		}
		return got.Labels["other-webhook"] == "was-here", fmt.Errorf("second webhook not active")
	}); err != nil {
		t.Fatal(err)
	}

	before := metric(t, in, metricRequests)
	otherBefore := calls.Load()
	pod := loadPod(t, "repo-server-pod.yaml")
	pod.Annotations[keys.PluginsAnnotation] = "helm, kustomize"
	stored := createStored(t, ns, pod)
	if stored.Labels["other-webhook"] != "was-here" {
		t.Fatal("the second webhook did not mutate the pod")
	}
	if n := metric(t, in, metricRequests) - before; n < 2 {
		t.Errorf("our webhook was called %v times; reinvocation did not happen", n)
	}
	t.Logf("our webhook calls: %v, second webhook calls: %d", metric(t, in, metricRequests)-before, calls.Load()-otherBefore)
	inits, mains := containerNames(stored)
	all := append(append([]string{}, inits...), mains...)
	for _, name := range []string{"cmp-helm", "cmp-kustomize", keys.SocketsContainer} {
		if n := countNames(all, name); n != 1 {
			t.Errorf("container %s appears %d times, want 1 (containers: %v)", name, n, all)
		}
	}
	// The library's images carry cmp-server (serverPath): nothing is copied.
	if n := countNames(all, keys.CopyInitContainer); n != 0 {
		t.Errorf("container %s appears %d times, want none (containers: %v)", keys.CopyInitContainer, n, all)
	}
	var vols []string
	for _, v := range stored.Spec.Volumes {
		vols = append(vols, v.Name)
	}
	for _, v := range vols {
		if countNames(vols, v) != 1 {
			t.Errorf("volume %s duplicated: %v", v, vols)
		}
	}
}

// TestClassicSidecars: with native sidecars off the plugin servers are appended
// to containers, and the apiserver accepts that too.
func TestClassicSidecars(t *testing.T) {
	startInjector(t, catalogFor(t, false, map[string][]string{"*": {"helm"}}))
	ns := newNamespace(t, "classic", enabledNS)
	waitActive(t, ns)
	stored := createStored(t, ns, loadPod(t, "repo-server-pod.yaml"))
	golden(t, "repo-server-pod.classic.stored."+minorVersion()+".yaml", stableStoredPod(stored))
	inits, mains := containerNames(stored)
	// No copy init container: the library's helm image carries cmp-server.
	if strings.Join(inits, ",") != "copyutil" || strings.Join(mains, ",") != "argocd-repo-server,cmp-helm,"+keys.SocketsContainer {
		t.Errorf("init containers %v, containers %v", inits, mains)
	}
}

// TestCatalogReload: a catalog change is served without a restart.
func TestCatalogReload(t *testing.T) {
	in := startInjector(t, catalogFor(t, true, map[string][]string{"*": {"helm"}}))
	c := env.cp.Client()
	ns := newNamespace(t, "reload", enabledNS)
	waitActive(t, ns)
	pod := loadPod(t, "repo-server-pod.yaml")
	pod.Annotations[keys.PluginsAnnotation] = "kustomize"
	if _, err := c.CreatePod(ns, pod, true); err == nil {
		t.Fatal("kustomize admitted before it was enabled")
	}
	start := time.Now()
	if err := os.WriteFile(in.Catalog+".new", catalogFor(t, true, map[string][]string{"*": {"helm", "kustomize"}}), 0o644); err != nil {
		t.Fatal(err)
	}
	// Replace the file the way a ConfigMap volume update does: atomically.
	if err := os.Rename(in.Catalog+".new", in.Catalog); err != nil {
		t.Fatal(err)
	}
	if err := harness.Eventually(60*time.Second, 100*time.Millisecond, func() (bool, error) {
		got, err := c.CreatePod(ns, pod.DeepCopy(), true)
		if err != nil {
			return false, err
		}
		inits, _ := containerNames(got)
		return countNames(inits, "cmp-kustomize") == 1, fmt.Errorf("kustomize not injected")
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("catalog change served %s after the file changed", time.Since(start).Round(time.Millisecond))
	if in.Output() == "" {
		t.Error("injector logged nothing")
	}
}

// TestInjectorDown: failurePolicy decides what happens when the injector is gone.
func TestInjectorDown(t *testing.T) {
	for _, tc := range []struct {
		policy string
		admit  bool
	}{{"Fail", false}, {"Ignore", true}} {
		t.Run("failurePolicy "+tc.policy, func(t *testing.T) {
			in := startInjector(t, catalogFor(t, true, map[string][]string{"*": {"helm"}}), "webhook.failurePolicy="+tc.policy)
			c := env.cp.Client()
			ns := newNamespace(t, "down", enabledNS)
			waitActive(t, ns)
			if err := in.Stop(); err != nil {
				t.Logf("injector exit: %v", err)
			}
			got, err := c.CreatePod(ns, loadPod(t, "repo-server-pod.yaml"), false)
			if !tc.admit {
				if err == nil {
					t.Fatal("pod admitted with the injector down and failurePolicy Fail")
				}
				msg := apiMessage(t, err)
				t.Logf("as expected (injector down, failurePolicy Fail), the pod is refused; the user sees: %s", msg)
				if !strings.Contains(msg, "inject.cmp-injector.io") {
					t.Errorf("message %q does not name the webhook", msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("failurePolicy Ignore rejected the pod: %v", err)
			}
			if _, ok := got.Annotations[keys.StatusAnnotation]; ok || len(got.Spec.InitContainers) != 1 {
				t.Error("pod was injected although the injector is down")
			}
		})
	}
}

// TestCertificateRotation rotates to a new CA and serving certificate while pods
// are being created: first the webhook trusts old+new CA, then the injector's
// files are swapped; the injector must pick them up without a restart and no
// admission may fail.
// TestCertificateRotation rotates the serving certificate with our own tool
// under load, five times with the kept CA (the caBundle never changes) and
// once the CA itself (the tool's bundle of new and old CA goes into the
// caBundle first, the old CA leaves it last): no admission may fail.
func TestCertificateRotation(t *testing.T) {
	in := startInjector(t, catalogFor(t, true, map[string][]string{"*": {"helm"}}))
	c := env.cp.Client()
	ns := newNamespace(t, "rotate", enabledNS)
	waitActive(t, ns)

	var (
		mu       sync.Mutex
		failures []string
		created  int
		stop     = make(chan struct{})
		done     = make(chan struct{})
	)
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			pod := loadPod(t, "repo-server-pod.yaml")
			pod.Name = fmt.Sprintf("rot-%d", i)
			got, err := c.CreatePod(ns, pod, false)
			mu.Lock()
			created++
			if err != nil {
				failures = append(failures, err.Error())
			} else if _, ok := got.Annotations[keys.StatusAnnotation]; !ok {
				failures = append(failures, pod.Name+" not injected")
			}
			mu.Unlock()
			if i >= 5000 {
				return
			}
		}
	}()

	// install puts a certificate where the injector reads it, as a Secret
	// update would, and waits until the injector serves it.
	install := func(newDir string) {
		t.Helper()
		for _, f := range []string{"tls.key", "tls.crt"} {
			b, err := os.ReadFile(filepath.Join(newDir, f))
			if err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(filepath.Dir(in.CertFile), f)
			if err := os.WriteFile(dst+".tmp", b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(dst+".tmp", dst); err != nil {
				t.Fatal(err)
			}
		}
		want, err := tls.LoadX509KeyPair(filepath.Join(newDir, "tls.crt"), filepath.Join(newDir, "tls.key"))
		if err != nil {
			t.Fatal(err)
		}
		if err := harness.Eventually(30*time.Second, 50*time.Millisecond, func() (bool, error) {
			conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", in.Port), &tls.Config{InsecureSkipVerify: true})
			if err != nil {
				return false, err
			}
			defer conn.Close()
			served := conn.ConnectionState().PeerCertificates[0].Raw
			return string(served) == string(want.Certificate[0]), errors.New("old certificate still served")
		}); err != nil {
			t.Fatalf("injector did not pick up the rotated certificate: %v", err)
		}
	}
	time.Sleep(time.Second)
	caBundle := func() string {
		b, _ := os.ReadFile(in.CAFile)
		return string(b)
	}()
	for i := 0; i < 5; i++ {
		newDir := filepath.Join(t.TempDir(), "leaf")
		if err := harness.RunCerts(env.bins["cmp-injector"], newDir, in.CADir); err != nil {
			t.Fatal(err)
		}
		if ca, _ := os.ReadFile(filepath.Join(newDir, "ca.crt")); string(ca) != caBundle {
			t.Fatal("a leaf rotation with the kept CA changed ca.crt")
		}
		install(newDir)
	}

	// The CA itself: trust both, serve the new leaf, then trust the new CA only.
	caDir := filepath.Join(t.TempDir(), "ca-rotation")
	if err := harness.RunCerts(env.bins["cmp-injector"], caDir, in.CADir, "--rotate-ca"); err != nil {
		t.Fatal(err)
	}
	both, err := os.ReadFile(filepath.Join(caDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(both), "BEGIN CERTIFICATE") != 2 {
		t.Fatalf("the CA rotation's ca.crt is not a bundle of two:\n%s", both)
	}
	installWebhookWithCA(t, in, base64.StdEncoding.EncodeToString(both))
	time.Sleep(2 * time.Second) // the apiserver's informer picks up the new bundle
	install(caDir)
	newCA, err := os.ReadFile(filepath.Join(in.CADir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	installWebhookWithCA(t, in, base64.StdEncoding.EncodeToString(newCA))
	time.Sleep(2 * time.Second)
	close(stop)
	<-done
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d pods created during 5 certificate rotations and 1 CA rotation, %d failed", created, len(failures))
	if len(failures) > 0 {
		t.Errorf("admissions failed during rotation: %v", failures[:min(len(failures), 5)])
	}
	if created < 10 {
		t.Errorf("only %d pods created during rotation; the test proves little", created)
	}
}
