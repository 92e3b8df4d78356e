package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// TestWebhookProtocols: kube-apiserver calls a webhook at a localhost URL over
// HTTP/2 (from v1.30; see localhostProto) and a webhook anywhere else over
// HTTP/1.1, as it calls one behind a Service (k8s.io/apiserver/pkg/util/webhook).
// The suite's other tests use 127.0.0.1, so this is the one that drives the
// HTTP/1.1 path of a cluster with the real API server. 0.0.0.0 is not a loopback address to the API
// server's check, yet Linux connects to it over loopback, where the injector
// listens.
func TestWebhookProtocols(t *testing.T) {
	in := startInjector(t, catalogFor(t, true, map[string][]string{"*": {"helm"}}))
	ca, err := in.CABundle()
	if err != nil {
		t.Fatal(err)
	}
	c := env.cp.Client()
	for _, tc := range []struct{ name, host, want string }{
		{"localhost URL", "127.0.0.1", localhostProto(t, kubeVersion())},
		{"any other URL, as for a Service", "0.0.0.0", "HTTP/1.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := fmt.Sprintf("https://%s:%d/mutate", tc.host, in.Port)
			name, err := c.InstallWebhook(kubeVersion(), url, ca)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Delete(webhookPath + "/" + name) })
			ns := newNamespace(t, "proto", enabledNS)
			// The API server picks up the changed configuration in its own
			// time; until then a review may still come by the old URL.
			var seen map[string]int
			err = harness.Eventually(30*time.Second, 50*time.Millisecond, func() (bool, error) {
				pod := loadPod(t, "repo-server-pod.yaml")
				got, err := c.CreatePod(ns, pod, true)
				if err != nil {
					return false, err
				}
				if _, ok := got.Annotations[keys.StatusAnnotation]; !ok {
					return false, fmt.Errorf("pod not injected")
				}
				seen = protocols(in.Output(), ns)
				return seen[tc.want] > 0, fmt.Errorf("reviews in %s by protocol: %v", ns, seen)
			})
			if err != nil {
				t.Fatalf("no review over %s: %v", tc.want, err)
			}
		})
	}
}

// localhostProto is the protocol kube-apiserver calls a webhook at a loopback
// URL with. Before v1.30 its webhook client offered only http/1.1 to every
// webhook; v1.30 (k8s.io/apiserver v0.30, isLocalHost in
// pkg/util/webhook/client.go) lets a loopback URL negotiate HTTP/2. Read in
// apiserver v0.27.16-v0.29.15 and v0.30.14-v0.37.2; the matrix's v1.29.15 cell
// saw only HTTP/1.1 reviews.
func localhostProto(t *testing.T, kube string) string {
	t.Helper()
	v, err := version.ParseGeneric(kube)
	if err != nil {
		t.Fatalf("kube-apiserver version %q: %v", kube, err)
	}
	if v.LessThan(version.MajorMinor(1, 30)) {
		return "HTTP/1.1"
	}
	return "HTTP/2.0"
}

// protocols counts the injector's review log lines for namespace ns by the
// protocol they came over.
func protocols(logs, ns string) map[string]int {
	out := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Namespace string `json:"namespace"`
			Proto     string `json:"proto"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Namespace == ns && line.Proto != "" {
			out[line.Proto]++
		}
	}
	return out
}
