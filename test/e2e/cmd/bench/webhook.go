package main

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// loadResult is what one `bench load` child reports.
type loadResult struct {
	Requests int     `json:"requests"`
	PerSec   float64 `json:"perSec"`
	P50us    float64 `json:"p50us"`
	P99us    float64 `json:"p99us"`
	Proto    string  `json:"proto"`
	Failures int     `json:"failures"`
	// RespBytes is the size of the first response's body.
	RespBytes int `json:"respBytes"`
}

func runWebhook(o options) error {
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "webhook-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if out, err := exec.Command(o.injectors[0].path, "certs", "--service", "bench", "--namespace", "default", "--out-dir", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("certs: %w\n%s", err, out)
	}
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	catalog := filepath.Join(root, "deploy", "plugins", "catalog.yaml")
	small, err := writeReview(dir, "pod.json", benchPod(1))
	if err != nil {
		return err
	}
	large, err := writeReview(dir, "pod50.json", benchPod(50))
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	// All targets run at once, pinned to the server CPU, and the loads take
	// turns (round by round, target by target): the VM's speed drifts over
	// minutes, and each round's ratio to the floor's run of the same load,
	// seconds before, keeps that drift out (pairedRatios). A target not under
	// load only waits.
	targets := []*target{{name: "floor", argv: []string{self, "floor", "--cert", cert, "--key", key}, floor: true}}
	for _, b := range o.injectors {
		targets = append(targets, &target{name: b.name, argv: []string{b.path, "serve", "--catalog", catalog, "--tls-cert-file", cert, "--tls-key-file", key}})
	}
	defer func() {
		for _, t := range targets {
			t.proc.stop()
		}
	}()
	for _, t := range targets {
		if err := t.start(dir); err != nil {
			return err
		}
	}
	// The no-op floor answers with a few bytes; an injector answers with its
	// patch. The same floor answering with a response of the first
	// injector's size shows what that size alone costs.
	ours, err := responseSize(targets[1].url+"/mutate", small)
	if err != nil {
		return fmt.Errorf("%s: %w", targets[1].name, err)
	}
	sized := &target{name: "floor+resp", argv: []string{self, "floor", "--cert", cert, "--key", key, "--response-bytes", strconv.Itoa(ours)}, floor: true}
	targets = append([]*target{targets[0], sized}, targets[1:]...)
	if err := sized.start(dir); err != nil {
		return err
	}

	fmt.Printf("\n== webhook: AdmissionReview CREATE of a repo-server pod asking for helm, over TLS on loopback, %s per load, median of %d interleaved rounds\n", o.webhookFor, o.webhookRounds)
	fmt.Printf("   the floor is a no-op TLS webhook (Go net/http, reads the body, decodes the uid, answers allowed)\n")
	// The loads: the repo-server pod at each concurrency, then the
	// 50-container pod one at a time.
	type loadSpec struct {
		label, body string
		clients     int
	}
	var loads []loadSpec
	for _, c := range o.concurrency {
		loads = append(loads, loadSpec{"c" + strconv.Itoa(c), small, c})
	}
	loads = append(loads, loadSpec{"50-ctr c1", large, 1})
	type cell struct{ proto, target, load string }
	runs := map[cell][]loadResult{}
	for range o.webhookRounds {
		for _, p := range o.protos {
			for _, l := range loads {
				for _, t := range targets {
					r, err := load(self, t.url+"/mutate", l.body, p, l.clients, o.webhookFor)
					if err != nil {
						return fmt.Errorf("%s %s %s: %w", t.name, p, l.label, err)
					}
					k := cell{p, t.name, l.label}
					runs[k] = append(runs[k], r)
				}
			}
		}
	}
	for _, p := range o.protos {
		fmt.Printf("\n  %s\n", protoTitle[p])
		fmt.Printf("  %-10s %-10s %8s %10s %8s %11s %9s %9s %8s %8s %14s\n", "webhook", "load", "proto", "reviews/s", "× floor", "× min-max", "p50 µs", "p99 µs", "p99 ×", "fails", "rounds min-max")
		for _, t := range targets {
			for _, l := range loads {
				rs := runs[cell{p, t.name, l.label}]
				r := medianLoad(rs)
				r.Failures = 0 // every round's, not the median's
				for _, x := range rs {
					r.Failures += x.Failures
				}
				lo, hi := spread(rs)
				x, p99 := pairedRatios(rs, runs[cell{p, "floor", l.label}])
				fmt.Printf("  %-10s %-10s %8s %10.0f %8.2f %5.2f-%-5.2f %9.0f %9.0f %8.2f %8d %7.0f-%-6.0f\n",
					t.name, l.label, r.Proto, r.PerSec, median(x), slices.Min(x), slices.Max(x), r.P50us, r.P99us, median(p99), r.Failures, lo, hi)
				if l.body == large && !t.floor {
					o.goals.add(fmt.Sprintf("webhook %s, %s, 50-container pod: p99 %.0f µs, the floor's %.0f µs (median of the rounds' ratios)",
						t.name, p, r.P99us, medianLoad(runs[cell{p, "floor", l.label}]).P99us), median(p99), 1, webhookP99OverFloor)
				}
			}
		}
	}
	fmt.Println()
	fmt.Println("  (× floor and p99 ×: medians of each round's ratio to the floor's load just before it, so that the VM's drift")
	fmt.Println("   between rounds cancels; × min-max: the rounds' lowest and highest ratio)")
	for _, t := range targets {
		fmt.Printf("  %-10s peak RSS %.0f MiB, response %d bytes\n", t.name, servingtest.PeakRSSMiB(t.proc.pid()), runs[cell{o.protos[0], t.name, loads[0].label}][0].RespBytes)
	}
	fmt.Printf("  (floor+resp: the no-op floor answering with a response as long as %s's, %d bytes: the part of the gap that is the response's size alone;\n",
		o.injectors[0].name, ours)
	fmt.Printf("   over 4 KiB, Go's HTTP/1.1 server writes it in two TLS records and its HTTP/2 server in two DATA frames the handler waits for)\n")
	return nil
}

// target is one webhook server of the comparison.
type target struct {
	name  string
	argv  []string
	floor bool
	url   string
	proc  *serverProc
}

func (t *target) start(dir string) error {
	port, err := harness.FreePort()
	if err != nil {
		return err
	}
	argv := append(append([]string(nil), t.argv...), "--listen", "127.0.0.1:"+strconv.Itoa(port))
	if !t.floor {
		mport, err := harness.FreePort()
		if err != nil {
			return err
		}
		argv = append(argv, "--metrics-listen", "127.0.0.1:"+strconv.Itoa(mport))
	}
	if t.proc, err = startServer(t.name, argv, nil, filepath.Join(dir, t.name+".log")); err != nil {
		return err
	}
	t.url = fmt.Sprintf("https://127.0.0.1:%d", port)
	if err := waitReady(t.url + "/readyz"); err != nil {
		t.proc.stop()
		return fmt.Errorf("%s: %w\n%s", t.name, err, t.proc.logTail())
	}
	return nil
}

// responseSize is the length of the target's answer to one review.
func responseSize(url, bodyFile string) (int, error) {
	body, err := os.ReadFile(bodyFile)
	if err != nil {
		return 0, err
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableCompression: true}}
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return len(b), err
}

// medianLoad is the round with the median throughput.
func medianLoad(rs []loadResult) loadResult {
	s := append([]loadResult(nil), rs...)
	sort.Slice(s, func(i, j int) bool { return s[i].PerSec < s[j].PerSec })
	return s[len(s)/2]
}

// pairedRatios are each round's throughput and p99 over the floor's in the
// same round: the floor ran the same load seconds before.
func pairedRatios(rs, floor []loadResult) (perSec, p99 []float64) {
	for i := range rs {
		perSec = append(perSec, rs[i].PerSec/floor[i].PerSec)
		p99 = append(p99, rs[i].P99us/floor[i].P99us)
	}
	return perSec, p99
}

func spread(rs []loadResult) (lo, hi float64) {
	lo, hi = rs[0].PerSec, rs[0].PerSec
	for _, r := range rs {
		lo, hi = min(lo, r.PerSec), max(hi, r.PerSec)
	}
	return lo, hi
}

// protoTitle says which clusters call a webhook over each protocol.
// kube-apiserver's webhook client (k8s.io/apiserver/pkg/util/webhook,
// hookClientConfig) offers only http/1.1 for a webhook behind a Service and
// for any URL whose host is not localhost, so that concurrent reviews spread
// over the Service's endpoints (kubernetes#75791). HTTP/2 is what it uses
// for a webhook at a localhost URL only.
var protoTitle = map[string]string{
	"http/1.1": "HTTP/1.1: how kube-apiserver calls a webhook behind a Service (the chart's default) or at a non-localhost URL",
	"h2":       "HTTP/2: how kube-apiserver calls a webhook at a localhost URL",
}

func waitReady(url string) error {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after 30s: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func load(self, url, body, proto string, c int, d time.Duration) (loadResult, error) {
	argv := pinned(0, self, "load", "--url", url, "--body", body, "--proto", proto, "--c", strconv.Itoa(c), "--for", d.String())
	out, err := exec.Command(argv[0], argv[1:]...).Output()
	if err != nil {
		var stderr string
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			stderr = string(ee.Stderr)
		}
		return loadResult{}, fmt.Errorf("%w %s", err, stderr)
	}
	var r loadResult
	err = json.Unmarshal(out, &r)
	return r, err
}

// loadMain posts the review in --body to --url from --c goroutines for --for
// and prints a loadResult, speaking --proto as kube-apiserver's webhook client
// would (see protoTitle): over HTTP/1.1 it keeps client-go's 25 idle
// connections per host, so concurrencies above that open new connections as
// the API server's would.
func loadMain(args []string) error {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	url := fs.String("url", "", "")
	bodyFile := fs.String("body", "", "")
	c := fs.Int("c", 1, "")
	d := fs.Duration("for", 3*time.Second, "")
	wantProto := fs.String("proto", "h2", "h2 or http/1.1")
	_ = fs.Parse(args)
	body, err := os.ReadFile(*bodyFile)
	if err != nil {
		return err
	}
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 1024,
	}
	switch *wantProto {
	case "h2":
	case "http/1.1":
		// client-go's transport (k8s.io/client-go/transport, idleConnsPerHost).
		tr.MaxIdleConnsPerHost = 25
		tr.ForceAttemptHTTP2 = false
		tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	default:
		return fmt.Errorf("--proto %q: want h2 or http/1.1", *wantProto)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: tr}
	// Warm-up: connections and the server's first allocations.
	warm := time.Now().Add(*d / 5)
	var proto string
	var respBytes int
	for time.Now().Before(warm) {
		resp, err := client.Post(*url, "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		proto = resp.Proto
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		respBytes = int(n)
	}
	lat := make([][]time.Duration, *c)
	fails := make([]int, *c)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(*d)
	for i := range *c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				t0 := time.Now()
				resp, err := client.Post(*url, "application/json", bytes.NewReader(body))
				if err != nil {
					fails[i]++
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"allowed":true`)) {
					fails[i]++
					continue
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all []time.Duration
	r := loadResult{Proto: proto, RespBytes: respBytes}
	for i := range lat {
		all = append(all, lat[i]...)
		r.Failures += fails[i]
	}
	if len(all) == 0 {
		return fmt.Errorf("no successful review (%d failures)", r.Failures)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	q := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))].Nanoseconds()) / 1e3 }
	r.Requests, r.PerSec, r.P50us, r.P99us = len(all), float64(len(all))/elapsed.Seconds(), q(0.5), q(0.99)
	return json.NewEncoder(os.Stdout).Encode(r)
}

// floorMain is the no-op webhook: TLS with Go's defaults (HTTP/2 and
// HTTP/1.1), the body read and the uid decoded, an allowed response.
func floorMain(args []string) error {
	fs := flag.NewFlagSet("floor", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:8443", "")
	cert := fs.String("cert", "", "")
	key := fs.String("key", "", "")
	size := fs.Int("response-bytes", 0, "answer with a JSON Patch (an empty one, padded) that makes the response this long")
	_ = fs.Parse(args)
	const head = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":%q,"allowed":true%s}}`
	var patch string
	if pad := *size - len(fmt.Sprintf(head, "0d5bd1a6-7f0e-4c4e-9d3b-2b7cbf4c1e11", `,"patchType":"JSONPatch","patch":""`)); pad > 4 {
		// base64 of "[" + spaces + "]": a valid, empty patch of the padded length.
		raw := "[" + strings.Repeat(" ", pad*3/4-2) + "]"
		patch = `,"patchType":"JSONPatch","patch":"` + base64.StdEncoding.EncodeToString([]byte(raw)) + `"`
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("/mutate", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		var in struct {
			Request struct {
				UID string `json:"uid"`
			} `json:"request"`
		}
		if err := json.Unmarshal(body, &in); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, head, in.Request.UID, patch)
	})
	return (&http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}).ListenAndServeTLS(*cert, *key)
}

func writeReview(dir, name string, pod *corev1.Pod) (string, error) {
	raw, err := json.Marshal(pod)
	if err != nil {
		return "", err
	}
	r := admissionv1.AdmissionReview{Request: &admissionv1.AdmissionRequest{
		UID:       types.UID("0d5bd1a6-7f0e-4c4e-9d3b-2b7cbf4c1e11"),
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Namespace: "argocd",
		Operation: admissionv1.Create,
		UserInfo: authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:replicaset-controller",
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}},
		Object: runtime.RawExtension{Raw: raw},
	}}
	r.SetGroupVersionKind(admissionv1.SchemeGroupVersion.WithKind("AdmissionReview"))
	b, err := json.Marshal(&r)
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, name)
	return p, os.WriteFile(p, b, 0o644)
}

// benchPod is a repo-server pod shaped like Argo CD's install (its volumes,
// mounts, env, probes and copyutil init container) asking for the helm plugin,
// with n containers in all: the others are copies of the repo-server container.
func benchPod(n int) *corev1.Pod {
	yes, no, uid := true, false, int64(999)
	mounts := []corev1.VolumeMount{}
	var vols []corev1.Volume
	for _, v := range []string{"ssh-known-hosts", "tls-certs", "gpg-keys", "gpg-keyring", "tmp", "helm-working-dir", "plugins", "var-files"} {
		mounts = append(mounts, corev1.VolumeMount{Name: v, MountPath: "/app/config/" + v})
		vols = append(vols, corev1.Volume{Name: v, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	var env []corev1.EnvVar
	for i := range 12 {
		env = append(env, corev1.EnvVar{Name: "ARGOCD_REPO_SERVER_SETTING_" + strconv.Itoa(i), ValueFrom: &corev1.EnvVarSource{
			ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "argocd-cmd-params-cm"}, Key: "reposerver.setting." + strconv.Itoa(i), Optional: &yes}}})
	}
	ctr := func(name string) corev1.Container {
		return corev1.Container{
			Name: name, Image: "quay.io/argoproj/argocd:v3.6.1", Args: []string{"/usr/local/bin/argocd-repo-server"},
			Ports: []corev1.ContainerPort{{ContainerPort: 8081}, {ContainerPort: 8084}},
			Env:   env, VolumeMounts: mounts,
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz?full=true"}}, PeriodSeconds: 30},
			LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz"}}, PeriodSeconds: 30},
			Resources:      corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")}},
			SecurityContext: &corev1.SecurityContext{RunAsNonRoot: &yes, ReadOnlyRootFilesystem: &yes, AllowPrivilegeEscalation: &no,
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		}
	}
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: "argocd-repo-server-7d9c5b8f6-", Namespace: "argocd",
			Labels:      map[string]string{"app.kubernetes.io/name": "argocd-repo-server", "app.kubernetes.io/part-of": "argocd", keys.InjectLabel: keys.EnabledValue},
			Annotations: map[string]string{keys.PluginsAnnotation: "helm"}},
		Spec: corev1.PodSpec{
			ServiceAccountName: "argocd-repo-server", AutomountServiceAccountToken: &no,
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: &uid},
			InitContainers: []corev1.Container{{Name: "copyutil", Image: "quay.io/argoproj/argocd:v3.6.1",
				Command:      []string{"sh", "-c", "/bin/cp /usr/local/bin/argocd /var/run/argocd/argocd && /bin/ln -sf /var/run/argocd/argocd /var/run/argocd/argocd-cmp-server"},
				VolumeMounts: []corev1.VolumeMount{{Name: "var-files", MountPath: "/var/run/argocd"}}}},
			Volumes: vols,
		},
	}
	pod.Spec.Containers = append(pod.Spec.Containers, ctr("argocd-repo-server"))
	for i := 1; i < n; i++ {
		pod.Spec.Containers = append(pod.Spec.Containers, ctr(fmt.Sprintf("worker-%02d", i)))
	}
	return pod
}
