package doctor

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cmp-injector/cmp-injector/certs"
	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// The install namespace and the objects the chart makes there.
const (
	installNS = "cmp-injector"
	tlsSecret = "cmp-injector-tls"
	catalogCM = "cmp-injector-catalog"
	leaseName = "rel-reconciler"
)

var testNow = time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC)

// install is a healthy installation as the chart makes it, with an argocd
// namespace holding one injected, current repo-server pod; each test breaks
// one thing and reads the report.
type install struct {
	bundle  *certs.Bundle
	dep     *appsv1.Deployment
	cm      *corev1.ConfigMap
	secret  *corev1.Secret
	mwc     *admissionv1.MutatingWebhookConfiguration
	svc     *corev1.Service
	slice   *discoveryv1.EndpointSlice
	lease   *coordinationv1.Lease
	ns      []*corev1.Namespace
	pods    []*corev1.Pod
	workObj []runtime.Object
}

func issue(t testing.TB, validity time.Duration, ips ...net.IP) *certs.Bundle {
	t.Helper()
	return issueAs(t, "cmp-injector", validity, ips...)
}

// issueAs issues a serving certificate for the webhook Service named service.
func issueAs(t testing.TB, service string, validity time.Duration, ips ...net.IP) *certs.Bundle {
	t.Helper()
	b, err := certs.Generate(certs.Options{Service: service, Namespace: installNS, IPs: ips, Validity: validity, Now: testNow.Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// chartRender is what charts/cmp-injector/templates/_helpers.tpl makes of one
// release's name and values, written out as helm template renders it (test/
// packaging's TestChartSelectsTheInjectorByItsService holds the chart to
// these): fullname ("cmp-injector.fullname") names the Deployment, Service,
// webhook configuration, TLS Secret and catalog ConfigMap; selector
// ("cmp-injector.selectorLabels") labels the pods and is the Service's
// selector, and every object's labels ("cmp-injector.labels") hold it.
type chartRender struct {
	fullname string
	selector map[string]string
}

// defaultRender is helm install cmp-injector -n cmp-injector with no
// overrides.
var defaultRender = chartRender{fullname: "cmp-injector",
	selector: map[string]string{"app.kubernetes.io/name": "cmp-injector", "app.kubernetes.io/instance": "cmp-injector"}}

// objectLabels are cmp-injector.labels but helm.sh/chart and
// app.kubernetes.io/version, which change with each release of the chart and
// which doctor does not read.
func (r chartRender) objectLabels() map[string]string {
	l := map[string]string{"app.kubernetes.io/managed-by": "Helm"}
	maps.Copy(l, r.selector)
	return l
}

func healthy(t testing.TB) *install {
	t.Helper()
	return healthyAs(t, defaultRender)
}

// healthyAs is healthy as the chart renders ch.
func healthyAs(t testing.TB, ch chartRender) *install {
	t.Helper()
	catYAML, err := os.ReadFile("../testdata/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b := issueAs(t, ch.fullname, 90*24*time.Hour)
	yes := true
	fail := admissionv1.Fail
	in := &install{bundle: b}
	tlsName, catalogName := ch.fullname+"-tls", ch.fullname+"-catalog"
	in.dep = &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: installNS, Name: ch.fullname, Labels: ch.objectLabels()},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: ch.selector},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: ch.selector}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "injector", Args: []string{"serve", "--catalog=/etc/cmp-injector/catalog.yaml", "--reconcile", "--leader-election-name=" + leaseName}}},
				Volumes: []corev1.Volume{
					{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: tlsName}}},
					{Name: "catalog", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: catalogName}}}},
				}}}},
	}
	in.cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: installNS, Name: catalogName}, Data: map[string]string{"catalog.yaml": string(catYAML)}}
	in.secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: installNS, Name: tlsName}, Data: map[string][]byte{"tls.crt": b.Cert, "tls.key": b.Key}}
	in.mwc = &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: ch.fullname, Labels: ch.objectLabels()},
		Webhooks: []admissionv1.MutatingWebhook{{
			Name:              keys.WebhookName,
			ClientConfig:      admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Namespace: installNS, Name: ch.fullname}, CABundle: b.CA},
			Rules:             []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create}, Rule: admissionv1.Rule{Resources: []string{"pods"}}}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{keys.NamespaceEnabledLabel: keys.EnabledValue}},
			FailurePolicy:     &fail,
		}}}
	in.svc = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: installNS, Name: ch.fullname, Labels: ch.objectLabels()},
		Spec: corev1.ServiceSpec{Selector: ch.selector}}
	in.slice = &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: installNS, Name: ch.fullname + "-x",
		Labels: map[string]string{"kubernetes.io/service-name": ch.fullname}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: &yes}}}}
	holder := "cmp-injector-0_abcd"
	secs := int32(15)
	in.lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: installNS, Name: leaseName},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &metav1.MicroTime{Time: testNow.Add(-3 * time.Second)}}}
	for _, name := range []string{"argocd", "team-a"} {
		in.ns = append(in.ns, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{keys.NamespaceEnabledLabel: keys.EnabledValue}}})
	}
	cat := loadTestCatalog(t)
	r := inject.Inject(repoServerPod("argocd", "argocd-repo-server-0"), "argocd", cat)
	if r.Decision != inject.Injected {
		t.Fatal(r.Message())
	}
	in.pods = []*corev1.Pod{r.Pod}
	return in
}

func (in *install) client() *fake.Clientset {
	objs := []runtime.Object{in.dep, in.cm, in.secret, in.mwc, in.svc, in.slice}
	if in.lease != nil { // a test may drop it
		objs = append(objs, in.lease)
	}
	for _, n := range in.ns {
		objs = append(objs, n)
	}
	for _, p := range in.pods {
		objs = append(objs, p)
	}
	objs = append(objs, in.workObj...)
	c := fake.NewClientset(objs...)
	c.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.34.4"}
	// A dry-run create answers as an API server with native sidecars does
	// (the fake would store the pod): catalog.native-sidecars asks one.
	c.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca := a.(k8stesting.CreateActionImpl)
		return len(ca.GetCreateOptions().DryRun) > 0, ca.GetObject(), nil
	})
	return c
}

func runOn(t testing.TB, c *fake.Clientset, o Options) *Report {
	t.Helper()
	o.Client, o.Host, o.Namespace = c, "https://api.test:6443", installNS
	if o.Now == nil {
		o.Now = func() time.Time { return testNow }
	}
	return Run(context.Background(), o)
}

func text(r *Report) string {
	var b strings.Builder
	r.WriteText(&b)
	return b.String()
}

// results are the report's results with check id.
func results(r *Report, id string) []*Result {
	var out []*Result
	for _, g := range r.Groups {
		for _, c := range g.Checks {
			if c.ID == id {
				out = append(out, c)
			}
		}
	}
	return out
}

// TestHealthyInstall: every check passes, each result carries its check's
// ID, and -o json has them.
func TestHealthyInstall(t *testing.T) {
	r := runOn(t, healthy(t).client(), Options{})
	out := text(r)
	if !r.OK || !strings.HasSuffix(out, "Status: all checks passed\n") || strings.Contains(out, "✘") {
		t.Fatalf("a healthy install:\n%s", out)
	}
	known := map[string]Check{}
	for _, c := range Checks() {
		if _, dup := known[c.ID]; dup {
			t.Errorf("check ID %s twice", c.ID)
		}
		if c.Severity != Error && c.Severity != Warning {
			t.Errorf("%s: severity %q", c.ID, c.Severity)
		}
		known[c.ID] = c
	}
	for _, g := range r.Groups {
		for _, c := range g.Checks {
			k, ok := known[c.ID]
			if !ok || k.Severity != c.Severity || k.Retryable != c.Retryable {
				t.Errorf("result %+v does not carry a known check's data", c)
			}
		}
	}
	for _, want := range []string{"cluster.api-reachable", "webhook.configured", "webhook.endpoints", "certificates.verify", "catalog.valid",
		"namespaces.enabled", "pods.current", "reconciler.lease"} {
		if len(results(r, want)) == 0 {
			t.Errorf("no result of %s:\n%s", want, out)
		}
	}
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(js, []byte(`"id":"pods.current","severity":"error","retryable":false,"ok":true`)) {
		t.Errorf("-o json lacks the pod check's id: %s", js)
	}
	t.Logf("\n%s", out)
}

// TestBrokenInstalls: each breakage fails its own check, with its severity
// and retryable flag, and a hint.
func TestBrokenInstalls(t *testing.T) {
	for name, tc := range map[string]struct {
		breakIt func(*install, *fake.Clientset)
		id      string
		warning bool
		retry   bool
		msg     string
	}{
		"API unreachable": {breakIt: func(_ *install, c *fake.Clientset) {
			c.PrependReactor("get", "version", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, errors.New("connection refused")
			})
		}, id: "cluster.api-reachable", msg: "cannot reach the API server at https://api.test:6443"},
		"no webhook configuration": {breakIt: func(in *install, c *fake.Clientset) {
			deleteObj(c, "mutatingwebhookconfigurations", "", "cmp-injector")
		},
			id: "webhook.configured", msg: "no MutatingWebhookConfiguration has the webhook"},
		"webhook configurations not readable": {breakIt: func(_ *install, c *fake.Clientset) { refuse(c, "list", "mutatingwebhookconfigurations") },
			id: "webhook.listable", retry: true, msg: "cannot list MutatingWebhookConfigurations"},
		"an empty caBundle": {breakIt: func(in *install, c *fake.Clientset) {
			in.mwc.Webhooks[0].ClientConfig.CABundle = nil
			update(c, in.mwc)
		}, id: "webhook.ca-bundle", retry: true, msg: "the caBundle is empty"},
		"a caBundle of another CA": {breakIt: func(in *install, c *fake.Clientset) {
			in.mwc.Webhooks[0].ClientConfig.CABundle = issue(t, time.Hour).CA
			update(c, in.mwc)
		}, id: "certificates.verify", retry: true, msg: "does not verify Secret cmp-injector/cmp-injector-tls"},
		"a caBundle that is not PEM": {breakIt: func(in *install, c *fake.Clientset) {
			in.mwc.Webhooks[0].ClientConfig.CABundle = []byte("garbage")
			update(c, in.mwc)
		}, id: "certificates.ca-bundle-pem", msg: "holds no PEM certificate"},
		"no Service": {breakIt: func(_ *install, c *fake.Clientset) { deleteObj(c, "services", installNS, "cmp-injector") },
			id: "webhook.service", msg: "webhook Service cmp-injector/cmp-injector"},
		"no ready endpoints": {breakIt: func(_ *install, c *fake.Clientset) { deleteObj(c, "endpointslices", installNS, "cmp-injector-x") },
			id: "webhook.endpoints", retry: true, msg: "has no ready endpoints"},
		"no TLS Secret": {breakIt: func(_ *install, c *fake.Clientset) { deleteObj(c, "secrets", installNS, tlsSecret) },
			id: "certificates.secret", retry: true, msg: "serving certificate Secret cmp-injector/cmp-injector-tls"},
		"a TLS Secret without a certificate": {breakIt: func(in *install, c *fake.Clientset) {
			in.secret.Data["tls.crt"] = []byte("no")
			update(c, in.secret)
		}, id: "certificates.secret", retry: true, msg: "tls.crt: no PEM certificate"},
		"a certificate expiring in 3 days": {breakIt: func(in *install, c *fake.Clientset) {
			in.secret.Data["tls.crt"] = issueFor(t, in, 4*24*time.Hour)
			update(c, in.secret)
			update(c, in.mwc)
		}, id: "certificates.expiry", warning: true, msg: "(3 days)"},
		"no injector Deployment": {breakIt: func(_ *install, c *fake.Clientset) { deleteObj(c, "deployments", installNS, "cmp-injector") },
			id: "certificates.source", msg: "no injector Deployment in namespace cmp-injector"},
		"no catalog ConfigMap": {breakIt: func(_ *install, c *fake.Clientset) { deleteObj(c, "configmaps", installNS, catalogCM) },
			id: "catalog.source", msg: "catalog ConfigMap cmp-injector/cmp-injector-catalog"},
		"an invalid catalog": {breakIt: func(in *install, c *fake.Clientset) {
			in.cm.Data["catalog.yaml"] = "apiVersion: nope\n"
			update(c, in.cm)
		}, id: "catalog.valid", msg: "ConfigMap cmp-injector/cmp-injector-catalog is not a valid catalog"},
		"namespaces not readable": {breakIt: func(_ *install, c *fake.Clientset) { refuse(c, "list", "namespaces") },
			id: "namespaces.listable", retry: true, msg: "cannot list namespaces"},
		"no namespace enabled": {breakIt: func(in *install, c *fake.Clientset) {
			for _, n := range in.ns {
				n.Labels = nil
				update(c, n)
			}
		}, id: "namespaces.enabled", msg: "no namespace matches the webhook's namespaceSelector"},
		"a catalog namespace not selected": {breakIt: func(in *install, c *fake.Clientset) {
			in.ns[1].Labels = nil
			update(c, in.ns[1])
		}, id: "namespaces.catalog-selected", warning: true, msg: "the catalog gives plugins to namespace team-a"},
		"pods not readable": {breakIt: func(_ *install, c *fake.Clientset) { refuse(c, "list", "pods") },
			id: "pods.listable", retry: true, msg: "cannot list pods"},
		"no Lease": {breakIt: func(_ *install, c *fake.Clientset) { deleteObj(c, "leases", installNS, leaseName) },
			id: "reconciler.lease", retry: true, msg: "no replica has taken the Lease cmp-injector/rel-reconciler"},
		"a Lease not renewed": {breakIt: func(in *install, c *fake.Clientset) {
			in.lease.Spec.RenewTime = &metav1.MicroTime{Time: testNow.Add(-time.Minute)}
			update(c, in.lease)
		}, id: "reconciler.lease", retry: true, msg: "is not being renewed (holder cmp-injector-0_abcd)"},
		"the Lease not readable": {breakIt: func(_ *install, c *fake.Clientset) { refuse(c, "get", "leases") },
			id: "reconciler.lease", retry: true, msg: "Lease cmp-injector/rel-reconciler: "},
	} {
		t.Run(name, func(t *testing.T) {
			in := healthy(t)
			c := in.client()
			tc.breakIt(in, c)
			r := runOn(t, c, Options{})
			out := text(r)
			var hit *Result
			for _, res := range results(r, tc.id) {
				if !res.OK && strings.Contains(res.Message, tc.msg) {
					hit = res
				}
			}
			if hit == nil {
				t.Fatalf("no failed %s saying %q:\n%s", tc.id, tc.msg, out)
			}
			wantSev := Error
			if tc.warning {
				wantSev = Warning
			}
			if hit.Severity != wantSev || hit.Retryable != tc.retry {
				t.Errorf("%s: severity %s retryable %v", tc.id, hit.Severity, hit.Retryable)
			}
			if hit.Hint == "" && tc.id != "catalog.source" && tc.id != "namespaces.listable" && tc.id != "pods.listable" && tc.id != "reconciler.lease" {
				t.Errorf("%s: no hint", tc.id)
			}
			if r.OK != tc.warning {
				t.Errorf("report ok %v with a failed %s %s", r.OK, wantSev, tc.id)
			}
			if tc.warning && (!strings.Contains(out, "‼ ") || !strings.Contains(out, ", 1 warning(s)")) {
				t.Errorf("a warning is not shown as one:\n%s", out)
			}
		})
	}
}

// issueFor is a serving certificate of in's CA's names, valid for validity
// from an hour before testNow: a fresh CA, so the caBundle is updated too.
func issueFor(t testing.TB, in *install, validity time.Duration) []byte {
	t.Helper()
	b := issueAs(t, in.svc.Name, validity)
	in.mwc.Webhooks[0].ClientConfig.CABundle = b.CA
	return b.Cert
}

func deleteObj(c *fake.Clientset, resource, ns, name string) {
	gvr := map[string]struct{ group, version string }{
		"mutatingwebhookconfigurations": {"admissionregistration.k8s.io", "v1"}, "services": {"", "v1"}, "endpointslices": {"discovery.k8s.io", "v1"},
		"secrets": {"", "v1"}, "deployments": {"apps", "v1"}, "configmaps": {"", "v1"}, "leases": {"coordination.k8s.io", "v1"},
	}[resource]
	if err := c.Tracker().Delete(schema.GroupVersionResource{Group: gvr.group, Version: gvr.version, Resource: resource}, ns, name); err != nil {
		panic(err)
	}
}

func refuse(c *fake.Clientset, verb, resource string) {
	c.PrependReactor(verb, resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("the server is currently unable to handle the request")
	})
}

// update stores o again in c (the test edited it after the clientset was
// made from it).
func update(c *fake.Clientset, o runtime.Object) {
	ctx := context.Background()
	var err error
	switch o := o.(type) {
	case *admissionv1.MutatingWebhookConfiguration:
		_, err = c.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, o, metav1.UpdateOptions{})
	case *corev1.Secret:
		_, err = c.CoreV1().Secrets(o.Namespace).Update(ctx, o, metav1.UpdateOptions{})
	case *corev1.ConfigMap:
		_, err = c.CoreV1().ConfigMaps(o.Namespace).Update(ctx, o, metav1.UpdateOptions{})
	case *corev1.Namespace:
		_, err = c.CoreV1().Namespaces().Update(ctx, o, metav1.UpdateOptions{})
	case *coordinationv1.Lease:
		_, err = c.CoordinationV1().Leases(o.Namespace).Update(ctx, o, metav1.UpdateOptions{})
	default:
		err = errors.New("update: unknown type")
	}
	if err != nil {
		panic(err)
	}
}

// TestPodFindings: a stale pod owned by a proven Deployment gets its
// rollout restart as the hint; a sidecar that restarted is a warning with
// how it ended; a pod not injected says why.
func TestPodFindings(t *testing.T) {
	in := healthy(t)
	// The stale pod: injected when helm's image was another one.
	old := strings.Replace(in.cm.Data["catalog.yaml"], "image: alpine/helm:3.16.2", "image: alpine/helm:3.15.0", 1)
	oldCat, err := catalog.Parse([]byte(old))
	if err != nil {
		t.Fatal(err)
	}
	dep, rs, base := ownedRepoServer("argocd", "argocd-repo-server")
	r := inject.Inject(base, "argocd", oldCat)
	if r.Decision != inject.Injected {
		t.Fatal(r.Message())
	}
	stale := r.Pod
	restarted := in.pods[0].DeepCopy()
	restarted.Name = "restarted"
	var st inject.Status
	if err := json.Unmarshal([]byte(restarted.Annotations[keys.StatusAnnotation]), &st); err != nil || len(st.InitContainers) == 0 {
		t.Fatalf("status %v: %v", st, err)
	}
	sidecar := st.InitContainers[len(st.InitContainers)-1]
	restarted.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: sidecar, RestartCount: 3,
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137, FinishedAt: metav1.NewTime(testNow)}}}}
	notInjected := repoServerPod("argocd", "plain")
	notInjected.Annotations[keys.PluginsAnnotation] = "nope"
	in.pods = append(in.pods, stale, restarted, notInjected)
	in.workObj = []runtime.Object{dep, rs}
	rep := runOn(t, in.client(), Options{})
	out := text(rep)
	find := func(id, pod string) *Result {
		for _, res := range results(rep, id) {
			if !res.OK && res.podID == "argocd/"+pod {
				return res
			}
		}
		t.Fatalf("no failed %s for %s:\n%s", id, pod, out)
		return nil
	}
	if c := find("pods.current", stale.Name); !strings.Contains(c.Hint, "rollout restart deployment/argocd-repo-server") || c.Pod == nil || len(c.Pod.Stale) == 0 {
		t.Errorf("stale pod: %+v", c)
	}
	if c := find("pods.sidecar-restarts", "restarted"); c.Severity != Warning || !strings.Contains(c.Message, "restarted 3 time(s); last ended OOMKilled (exit 137)") ||
		!strings.Contains(c.Hint, "raise the plugin's memory limit") {
		t.Errorf("restarted sidecar: %+v", c)
	}
	if c := find("pods.injected", "plain"); !strings.Contains(c.Message, "not injected: ") {
		t.Errorf("not injected: %+v", c)
	}
	if rep.OK {
		t.Error("a stale pod passed")
	}
	t.Logf("\n%s", out)
}

// ownedRepoServer is an opted-in Deployment, its current ReplicaSet and a
// repo-server pod of it, linked as the Deployment controller links them.
func ownedRepoServer(ns, name string) (*appsv1.Deployment, *appsv1.ReplicaSet, *corev1.Pod) {
	yes := true
	pod := repoServerPod(ns, name+"-abc-x1")
	pod.Labels["app"] = name
	pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = "abc"
	tmplLabels := map[string]string{"app": name, keys.InjectLabel: keys.EnabledValue}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name + "-dep"),
		Annotations: map[string]string{keys.DeploymentRevisionAnnotation: "1"}},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: tmplLabels}, Spec: pod.Spec}}}
	rsLabels := map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: "abc"}
	for k, v := range tmplLabels {
		rsLabels[k] = v
	}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-abc", UID: types.UID(name + "-rs"),
		Annotations:     map[string]string{keys.DeploymentRevisionAnnotation: "1"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: name, UID: dep.UID, Controller: &yes}}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name, appsv1.DefaultDeploymentUniqueLabelKey: "abc"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: rsLabels}, Spec: pod.Spec}}}
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: &yes}}
	return dep, rs, pod
}

// TestRetriesRetryableFailures: with a wait, doctor checks again while every
// failed error is retryable, and stops once they pass; a failure that cannot
// clear by itself is not retried.
func TestRetriesRetryableFailures(t *testing.T) {
	in := healthy(t)
	c := in.client()
	var lists atomic.Int32
	c.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		if lists.Add(1) == 1 {
			return true, &discoveryv1.EndpointSliceList{}, nil // the injector's pods are starting
		}
		return false, nil, nil
	})
	var retries []string
	// The clock stands still: the wait never ends by itself here.
	r := runOn(t, c, Options{Wait: time.Minute, RetryEvery: time.Millisecond,
		OnRetry: func(failed []*Result, _ time.Duration) {
			if retries = append(retries, failed[0].ID); len(retries) > 5 {
				t.Fatalf("retried %v", retries)
			}
		}})
	if !r.OK || lists.Load() != 2 || len(retries) != 1 || retries[0] != "webhook.endpoints" {
		t.Errorf("ok %v after %d attempts, retries %v:\n%s", r.OK, lists.Load(), retries, text(r))
	}

	// An invalid catalog stays invalid: one attempt.
	in = healthy(t)
	in.cm.Data["catalog.yaml"] = "apiVersion: nope\n"
	c = in.client()
	var attempts atomic.Int32
	c.PrependReactor("get", "version", func(k8stesting.Action) (bool, runtime.Object, error) {
		attempts.Add(1)
		return false, nil, nil
	})
	if r := runOn(t, c, Options{Wait: time.Minute, RetryEvery: time.Millisecond}); r.OK || attempts.Load() != 1 {
		t.Errorf("ok %v after %d attempts", r.OK, attempts.Load())
	}

	// A retryable failure that does not clear: retried until the wait ends
	// (here ctx ends first).
	in = healthy(t)
	c = in.client()
	deleteObj(c, "leases", installNS, leaseName)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	r = Run(ctx, Options{Client: c, Namespace: installNS, Wait: time.Hour, RetryEvery: time.Millisecond,
		OnRetry: func([]*Result, time.Duration) {
			if n++; n == 3 {
				cancel()
			}
		}})
	cancel()
	if r.OK || n != 3 {
		t.Errorf("ok %v after %d retries", r.OK, n)
	}
}

// TestWebhookURL: an injector outside the cluster (webhook.url) is dialled:
// its certificate is verified against the caBundle and /readyz asked.
func TestWebhookURL(t *testing.T) {
	b := issue(t, 90*24*time.Hour, net.IPv4(127, 0, 0, 1))
	pair, err := tls.X509KeyPair(b.Cert, b.Key)
	if err != nil {
		t.Fatal(err)
	}
	var ready atomic.Bool
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" && ready.Load() {
			return
		}
		http.Error(w, "no valid catalog loaded", http.StatusServiceUnavailable)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	in := healthy(t)
	url := srv.URL + "/mutate"
	in.mwc.Webhooks[0].ClientConfig = admissionv1.WebhookClientConfig{URL: &url, CABundle: b.CA}
	// Certificates are judged by the real clock here: the TLS handshake is.
	opts := Options{Now: time.Now}

	ready.Store(true)
	r := runOn(t, in.client(), opts)
	for _, id := range []string{"webhook.reachable", "webhook.ready", "certificates.verify"} {
		if res := results(r, id); len(res) == 0 || !res[0].OK {
			t.Errorf("%s: %+v\n%s", id, res, text(r))
		}
	}
	ready.Store(false)
	r = runOn(t, in.client(), opts)
	if res := results(r, "webhook.ready"); len(res) == 0 || res[0].OK || !strings.Contains(res[0].Message, "503") {
		t.Errorf("not ready: %+v", res)
	}

	bad := "https://127.0.0.1:1/mutate"
	in.mwc.Webhooks[0].ClientConfig.URL = &bad
	r = runOn(t, in.client(), opts)
	if res := results(r, "webhook.reachable"); len(res) == 0 || res[0].OK || !res[0].Retryable {
		t.Errorf("unreachable: %+v", res)
	}
	garbage := "https://%zz/mutate"
	in.mwc.Webhooks[0].ClientConfig.URL = &garbage
	r = runOn(t, in.client(), opts)
	if res := results(r, "webhook.url"); len(res) == 0 || res[0].OK {
		t.Errorf("bad URL: %+v", res)
	}
}

// TestReconcilerOff: with the reconciler off there is no Lease to check.
func TestReconcilerOff(t *testing.T) {
	in := healthy(t)
	in.dep.Spec.Template.Spec.Containers[0].Args = []string{"serve", "--catalog=/etc/cmp-injector/catalog.yaml"}
	in.lease = nil
	r := runOn(t, in.client(), Options{})
	if res := results(r, "reconciler.lease"); !r.OK || len(res) != 1 || !strings.Contains(res[0].Message, "off (reconciler.enabled=false)") {
		t.Errorf("%+v\n%s", res, text(r))
	}
}

// TestCatalogFile: --catalog judges pods against a file; one that cannot be
// read is a failed catalog.source.
func TestCatalogFile(t *testing.T) {
	in := healthy(t)
	r := runOn(t, in.client(), Options{CatalogFile: "../testdata/catalog.yaml"})
	if res := results(r, "catalog.valid"); !r.OK || len(res) != 1 || !strings.HasPrefix(res[0].Message, "../testdata/catalog.yaml loads") {
		t.Errorf("%+v", res)
	}
	r = runOn(t, in.client(), Options{CatalogFile: "../testdata/none.yaml"})
	if res := results(r, "catalog.source"); len(res) != 1 || res[0].OK {
		t.Errorf("%+v", res)
	}
}

// TestWebhookURLEndsWithTheContext: an injector URL that accepts and never
// answers the handshake holds doctor only until its context ends (Ctrl-C,
// --timeout), not for a dial timeout of its own.
func TestWebhookURLEndsWithTheContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		cancel() // the handshake is under way: the admin gives up
		<-t.Context().Done()
	}()
	in := healthy(t)
	url := "https://" + ln.Addr().String() + "/mutate"
	in.mwc.Webhooks[0].ClientConfig = admissionv1.WebhookClientConfig{URL: &url, CABundle: in.bundle.CA}
	r := Run(ctx, Options{Client: in.client(), Namespace: installNS, Now: func() time.Time { return testNow }})
	if res := results(r, "webhook.reachable"); len(res) != 1 || res[0].OK || !strings.Contains(res[0].Message, "canceled") {
		t.Errorf("%+v\n%s", res, text(r))
	}
}
