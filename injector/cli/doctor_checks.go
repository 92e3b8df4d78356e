package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/cmp-injector/cmp-injector/injector/reconcile"
	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// doctor looks at an installation through the API, the way an admin would
// with kubectl, and says what is wrong and what to do. It decides nothing
// itself: injection questions go to pkg/inject, as in the webhook.
type doctor struct {
	client      kubernetes.Interface
	host        string
	namespace   string // where the injector is installed
	catalogFile string
	now         time.Time
	report      doctorReport

	webhooks []webhookRef
	injector *appsv1.Deployment
	cat      *catalog.Catalog
	enabled  map[string]bool
}

type webhookRef struct {
	config string
	hook   admissionv1.MutatingWebhook
}

// certWarnDays is when a serving certificate's expiry becomes a failure: the
// chart's cert-manager Certificate renews 30 days ahead, so 7 means renewal
// is not happening.
const certWarnDays = 7

func (d *doctor) run(ctx context.Context) {
	g := d.report.group("cluster")
	v, err := d.client.Discovery().ServerVersion()
	if err != nil {
		g.fail("cannot reach the API server at "+d.host+": "+err.Error(), "check --kubeconfig and the current context (kubectl cluster-info)")
		return
	}
	g.pass(fmt.Sprintf("API server %s, Kubernetes %s", d.host, v.GitVersion))
	d.findInjector(ctx)
	d.checkWebhooks(ctx)
	d.checkCatalog(ctx)
	d.checkNamespaces(ctx)
	d.checkPods(ctx)
	d.checkReconciler(ctx)
}

// findInjector finds the injector's Deployment in the install namespace.
func (d *doctor) findInjector(ctx context.Context) {
	deps, err := d.client.AppsV1().Deployments(d.namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=cmp-injector"})
	if err == nil && len(deps.Items) > 0 {
		d.injector = &deps.Items[0]
	}
}

func (d *doctor) checkWebhooks(ctx context.Context) {
	g := d.report.group("webhook")
	list, err := d.client.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		g.fail("cannot list MutatingWebhookConfigurations: "+err.Error(), "doctor needs cluster-wide read access (a cluster admin's kubeconfig)")
		return
	}
	for _, c := range list.Items {
		for _, h := range c.Webhooks {
			if h.Name == keys.WebhookName {
				d.webhooks = append(d.webhooks, webhookRef{config: c.Name, hook: h})
			}
		}
	}
	if len(d.webhooks) == 0 {
		g.fail("no MutatingWebhookConfiguration has the webhook "+keys.WebhookName,
			"install the chart (helm install cmp-injector charts/cmp-injector -n "+d.namespace+") or kubectl apply -k deploy/base")
		return
	}
	for _, w := range d.webhooks {
		h := w.hook
		ops := []string{}
		for _, r := range h.Rules {
			for _, op := range r.Operations {
				ops = append(ops, string(op))
			}
		}
		policy := "Fail"
		if h.FailurePolicy != nil {
			policy = string(*h.FailurePolicy)
		}
		sel, _ := metav1.LabelSelectorAsSelector(h.NamespaceSelector)
		g.pass(fmt.Sprintf("%s: %s of pods in namespaces matching %q, failurePolicy %s", w.config, strings.Join(ops, ","), sel.String(), policy))
		if len(h.ClientConfig.CABundle) == 0 {
			g.fail(w.config+": the caBundle is empty, so the API server cannot trust the injector",
				"with certificates.mode=certManager check that cert-manager's cainjector runs; with mode secret set certificates.caBundle")
			continue
		}
		switch {
		case h.ClientConfig.Service != nil:
			d.checkService(ctx, g, w)
		case h.ClientConfig.URL != nil:
			d.checkURL(g, w)
		}
	}
}

// checkService: the webhook's Service has ready endpoints, and the serving
// certificate in the injector's TLS Secret is one the caBundle verifies.
func (d *doctor) checkService(ctx context.Context, g *checkGroup, w webhookRef) {
	svc := w.hook.ClientConfig.Service
	ref := svc.Namespace + "/" + svc.Name
	if _, err := d.client.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{}); err != nil {
		g.fail("webhook Service "+ref+": "+err.Error(), "the chart creates it; reinstall or check the release namespace")
		return
	}
	eps, err := d.client.DiscoveryV1().EndpointSlices(svc.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + svc.Name})
	ready := 0
	if err == nil {
		for _, s := range eps.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready == nil || *e.Conditions.Ready {
					ready += len(e.Addresses)
				}
			}
		}
	}
	if ready == 0 {
		g.fail("webhook Service "+ref+" has no ready endpoints: pods that ask for plugins are refused (failurePolicy Fail) or start without them (Ignore)",
			"kubectl -n "+svc.Namespace+" get pods -l app.kubernetes.io/name=cmp-injector; kubectl -n "+svc.Namespace+" describe pods -l app.kubernetes.io/name=cmp-injector")
	} else {
		g.pass(fmt.Sprintf("webhook Service %s has %d ready endpoint(s)", ref, ready))
	}
	cg := d.report.group("certificates")
	if d.injector == nil {
		cg.fail("no injector Deployment in namespace "+d.namespace+" to read the serving certificate from", "pass --namespace, the namespace the chart is installed in")
		return
	}
	secret := ""
	for _, v := range d.injector.Spec.Template.Spec.Volumes {
		if v.Name == "tls" && v.Secret != nil {
			secret = v.Secret.SecretName
		}
	}
	s, err := d.client.CoreV1().Secrets(d.namespace).Get(ctx, secret, metav1.GetOptions{})
	if err != nil {
		cg.fail("serving certificate Secret "+d.namespace+"/"+secret+": "+err.Error(), "with certificates.mode=certManager: kubectl -n "+d.namespace+" describe certificate")
		return
	}
	cert, err := parseCert(s.Data["tls.crt"])
	if err != nil {
		cg.fail("Secret "+d.namespace+"/"+secret+" tls.crt: "+err.Error(), "recreate it: cmp-injector certs --service ... --secret-name "+secret)
		return
	}
	d.checkCert(cg, w, cert, svc.Name+"."+svc.Namespace+".svc", "Secret "+d.namespace+"/"+secret)
}

// checkURL: an injector outside the cluster (webhook.url) answers TLS with a
// certificate the caBundle verifies, and is ready.
func (d *doctor) checkURL(g *checkGroup, w webhookRef) {
	u, err := url.Parse(*w.hook.ClientConfig.URL)
	if err != nil {
		g.fail(w.config+": webhook URL: "+err.Error(), "set webhook.url to https://host:port/mutate")
		return
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "443")
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", host, &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true}) //nolint:gosec // verified below against the caBundle, as the API server would
	if err != nil {
		g.fail(w.config+": cannot connect to "+u.Host+": "+err.Error(), "is the injector running and listening there?")
		return
	}
	certs := conn.ConnectionState().PeerCertificates
	conn.Close()
	g.pass(w.config + ": the injector answers at " + u.Host)
	d.checkCert(d.report.group("certificates"), w, certs[0], u.Hostname(), "the certificate served at "+u.Host)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(w.hook.ClientConfig.CABundle)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}}}
	ready := *u
	ready.Path = "/readyz"
	resp, err := hc.Get(ready.String())
	if err != nil {
		return // reported by the certificate check
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		g.fail(fmt.Sprintf("%s: the injector is not ready (%s)", w.config, resp.Status), "its log says why: a catalog or certificate it cannot load")
		return
	}
	g.pass(w.config + ": the injector is ready")
}

// checkCert verifies cert against the webhook's caBundle for name, as the API
// server does, and reports how long it has left.
func (d *doctor) checkCert(g *checkGroup, w webhookRef, cert *x509.Certificate, name, where string) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(w.hook.ClientConfig.CABundle) {
		g.fail(w.config+": the caBundle holds no PEM certificate", "set it to the base64 PEM of the CA (certificates.caBundle)")
		return
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: name, CurrentTime: d.now}); err != nil {
		g.fail(fmt.Sprintf("%s: the caBundle of %s does not verify %s for %s: %v", w.config, w.config, where, name, err),
			"the certificate was reissued by another CA: update the caBundle (cmp-injector certs --ca-dir keeps the CA; cert-manager's cainjector does it for mode certManager)")
		return
	}
	days := int(cert.NotAfter.Sub(d.now).Hours() / 24)
	msg := fmt.Sprintf("%s: the caBundle verifies %s for %s; it expires %s (%d days)", w.config, where, name, cert.NotAfter.Format(time.DateOnly), days)
	if days < certWarnDays {
		g.fail(msg, "renew it now: cmp-injector certs --ca-dir ... (mode secret), or kubectl -n "+d.namespace+" describe certificate (mode certManager)")
		return
	}
	g.pass(msg)
}

func parseCert(pemBytes []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(pemBytes)
	if b == nil {
		return nil, fmt.Errorf("no PEM certificate")
	}
	return x509.ParseCertificate(b.Bytes)
}

func (d *doctor) checkCatalog(ctx context.Context) {
	g := d.report.group("catalog")
	var data []byte
	var source string
	switch {
	case d.catalogFile != "":
		b, err := os.ReadFile(d.catalogFile)
		if err != nil {
			g.fail("catalog "+d.catalogFile+": "+err.Error(), "")
			return
		}
		data, source = b, d.catalogFile
	case d.injector != nil:
		name, key := catalogSource(d.injector)
		cm, err := d.client.CoreV1().ConfigMaps(d.namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			g.fail("catalog ConfigMap "+d.namespace+"/"+name+": "+err.Error(), "the chart renders it from catalog.* values; reinstall")
			return
		}
		data, source = []byte(cm.Data[key]), "ConfigMap "+d.namespace+"/"+name
	default:
		g.fail("no injector Deployment in namespace "+d.namespace+" to read the catalog of", "pass --namespace (the release namespace) or --catalog FILE")
		return
	}
	cat, err := catalog.Parse(data)
	if err != nil {
		g.fail(source+" is not a valid catalog: "+err.Error(), "the injector keeps serving the last valid catalog; fix the values and helm upgrade (cmp-injector explain --catalog FILE checks a file offline)")
		return
	}
	d.cat = cat
	g.pass(fmt.Sprintf("%s loads: revision %s, plugins %s", source, cat.Revision, strings.Join(cat.Names, ", ")))
}

// catalogSource is the ConfigMap and key the Deployment reads its catalog from.
func catalogSource(dep *appsv1.Deployment) (name, key string) {
	key = "catalog.yaml"
	for _, c := range dep.Spec.Template.Spec.Containers {
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--catalog="); ok {
				key = path.Base(v)
			}
		}
	}
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Name == "catalog" && v.ConfigMap != nil {
			name = v.ConfigMap.Name
		}
	}
	return name, key
}

func (d *doctor) checkNamespaces(ctx context.Context) {
	g := d.report.group("namespaces")
	sel := labels.SelectorFromSet(labels.Set{keys.NamespaceEnabledLabel: keys.EnabledValue})
	if len(d.webhooks) > 0 {
		if s, err := metav1.LabelSelectorAsSelector(d.webhooks[0].hook.NamespaceSelector); err == nil {
			sel = s
		}
	}
	list, err := d.client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		// enabled stays nil: checkPods then checks every labelled pod
		// rather than skip them all.
		g.fail("cannot list namespaces: "+err.Error(), "")
		return
	}
	d.enabled = map[string]bool{}
	var names []string
	for _, n := range list.Items {
		d.enabled[n.Name] = true
		names = append(names, n.Name)
	}
	hint := "kubectl label namespace argocd " + keys.NamespaceEnabledLabel + "=" + keys.EnabledValue
	if len(names) == 0 {
		g.fail("no namespace matches the webhook's namespaceSelector "+sel.String()+": nothing is injected", hint)
	} else {
		g.pass(fmt.Sprintf("%d namespace(s) enabled: %s", len(names), strings.Join(names, ", ")))
	}
	if d.cat == nil {
		return
	}
	for _, ns := range d.cat.Namespaces() {
		if ns != catalog.AllNamespaces && !d.enabled[ns] {
			g.fail("the catalog gives plugins to namespace "+ns+", which the webhook does not select",
				"kubectl label namespace "+ns+" "+keys.NamespaceEnabledLabel+"="+keys.EnabledValue)
		}
	}
}

// podReport is one repo-server pod's state, for -o json.
type podReport struct {
	Namespace string              `json:"namespace"`
	Name      string              `json:"name"`
	Injected  bool                `json:"injected"`
	Plugins   []string            `json:"plugins,omitempty"`
	Revision  string              `json:"revision,omitempty"`
	Current   bool                `json:"current"`
	Stale     []inject.Difference `json:"stale,omitempty"`
	Pending   []string            `json:"pendingConfig,omitempty"`
	Restarts  map[string]int32    `json:"sidecarRestarts,omitempty"`
}

// podPageSize bounds how many pods doctor holds at once: each page is
// checked and dropped before the next is read, so the pods' size (a
// 10 KiB annotation on each of 3,000 pods in an attack run) never adds up.
const podPageSize = 500

// skippedShown is how many namespaces the skipped-pods line names.
const skippedShown = 5

// checkPods checks every labelled pod in the namespaces the webhook selects.
// Pods elsewhere are only counted: the webhook is never called for them, and
// anyone who may create a pod anywhere can label it, so failing each one
// (2,000 ✘ lines in an attack run) buried what mattered.
func (d *doctor) checkPods(ctx context.Context) {
	g := d.report.group("repo-server pods")
	first := len(g.Checks)
	skipped := map[string]int{}
	checked := 0
	opts := metav1.ListOptions{LabelSelector: keys.InjectLabel + "=" + keys.EnabledValue, Limit: podPageSize}
	for {
		pods, err := d.client.CoreV1().Pods("").List(ctx, opts)
		if err != nil {
			g.fail("cannot list pods: "+err.Error(), "")
			break
		}
		for i := range pods.Items {
			pod := &pods.Items[i]
			// With the namespaces unknown (their list failed) every pod is
			// checked, as doctor cannot tell which the webhook sees.
			if d.enabled != nil && !d.enabled[pod.Namespace] {
				skipped[pod.Namespace]++
				continue
			}
			checked++
			d.checkPod(ctx, g, pod)
		}
		if pods.Continue == "" {
			break
		}
		if pods.Continue == opts.Continue {
			// A server that hands back the token it was given would keep
			// doctor listing the same page forever.
			g.fail("cannot list pods: the API server repeated continue token "+strconv.Quote(opts.Continue), "")
			break
		}
		opts.Continue = pods.Continue
	}
	// Pages come in the server's order; the report is in pod order, each
	// pod's checks in the order they were made.
	pods := g.Checks[first:]
	sort.SliceStable(pods, func(i, j int) bool { return pods[i].podID < pods[j].podID })
	if checked == 0 && len(skipped) == 0 {
		g.pass("no pod carries " + keys.InjectLabel + "=" + keys.EnabledValue + " yet")
	}
	if len(skipped) > 0 {
		d.report.SkippedPods = skipped
		g.pass(skippedMessage(skipped))
	}
}

// skippedMessage is the one line for labelled pods outside the enabled
// namespaces: how many, and the namespaces with the most of them.
func skippedMessage(skipped map[string]int) string {
	names := make([]string, 0, len(skipped))
	total := 0
	for ns, n := range skipped {
		names = append(names, ns)
		total += n
	}
	sort.Slice(names, func(i, j int) bool {
		if skipped[names[i]] != skipped[names[j]] {
			return skipped[names[i]] > skipped[names[j]]
		}
		return names[i] < names[j]
	})
	var shown []string
	for _, ns := range names[:min(len(names), skippedShown)] {
		shown = append(shown, fmt.Sprintf("%s: %d", ns, skipped[ns]))
	}
	if len(names) > skippedShown {
		shown = append(shown, "…")
	}
	return fmt.Sprintf("skipped %d pod(s) labelled %s=%s in %d namespace(s) the webhook does not select (%s): it is never called for them; to enable one, kubectl label namespace NS %s=%s",
		total, keys.InjectLabel, keys.EnabledValue, len(names), strings.Join(shown, ", "), keys.NamespaceEnabledLabel, keys.EnabledValue)
}

func (d *doctor) checkPod(ctx context.Context, g *checkGroup, pod *corev1.Pod) {
	pr := &podReport{Namespace: pod.Namespace, Name: pod.Name}
	if d.checkPodState(ctx, g, pod, pr) && d.cat != nil {
		d.checkPodConfig(g, pod, pr)
	}
}

// checkPodConfig flags config annotations that are not the catalog's: the
// sidecar serves them as its plugin.yaml (an attack run's edited one was
// reported only as "not injected" or as a pending update).
func (d *doctor) checkPodConfig(g *checkGroup, pod *corev1.Pod, pr *podReport) {
	id := pod.Namespace + "/" + pod.Name
	for _, p := range inject.CheckConfigAnnotations(pod, d.cat) {
		var hint string
		switch {
		case !pr.Injected:
			hint = "cmp-injector writes this annotation only when it injects a pod, and the webhook refuses pods that carry it: remove it from the pod's template and recreate the pod"
		case pr.Revision == d.cat.Revision:
			hint = "cmp-injector wrote catalog revision " + d.cat.Revision + "'s config, so it was edited on the pod since, while the webhook did not review its updates; the sidecar serves it: kubectl -n " +
				pod.Namespace + " delete pod " + pod.Name + " (its controller recreates it with the catalog's), and find who edited it in the API server's audit log"
		default:
			hint = "written at catalog revision " + pr.Revision + " or edited since; the sidecar serves it until the reconciler replaces it with revision " + d.cat.Revision +
				"'s (is it on and leading? See the reconciler group below), or until the pod is recreated"
		}
		g.failPod(pr, id+": plugin config not the catalog's: "+p.Message, hint)
	}
}

// checkPodState reports whether the pod is injected and current; it returns
// false for a pod doctor leaves alone, as the webhook does.
func (d *doctor) checkPodState(ctx context.Context, g *checkGroup, pod *corev1.Pod, pr *podReport) bool {
	id := pod.Namespace + "/" + pod.Name
	_, pr.Injected = pod.Annotations[keys.StatusAnnotation]
	var r *inject.Report
	if !pr.Injected && d.cat != nil {
		r = inject.Inject(pod, pod.Namespace, d.cat)
		// argo-helm's global.podLabels labels every Argo CD pod: the webhook
		// leaves those that are not repo-servers alone, and so does doctor.
		if r.Decision == inject.Skipped && r.Reasons[0] == inject.ReasonNotRepoServer {
			g.passPod(pr, id+": labelled but not a repo-server: left alone, as the webhook leaves it")
			return false
		}
	}
	switch {
	case !pr.Injected && d.cat == nil:
		g.failPod(pr, id+": not injected (no catalog to say why)", "")
		return true
	case !pr.Injected:
		switch r.Decision {
		case inject.Injected:
			g.failPod(pr, id+": not injected, though it would be now: it was created before its namespace was enabled or while the webhook was unavailable (failurePolicy Ignore)",
				"restart it: kubectl -n "+pod.Namespace+" delete pod "+pod.Name+" (its controller recreates it, injected)")
		default:
			g.failPod(pr, id+": not injected: "+r.Message(), "fix the pod's annotations; cmp-injector explain --catalog FILE -f pod.yaml says the same offline")
		}
		return true
	}
	if d.cat == nil {
		g.passPod(pr, id+": injected")
		return true
	}
	dr, err := inject.CheckDrift(pod, d.cat)
	if err != nil {
		g.failPod(pr, id+": "+err.Error(), "")
		return true
	}
	pr.Plugins, pr.Revision, pr.Stale = dr.Status.Plugins, dr.Recorded.Revision, dr.Stale
	// A config the pod carries but that differs is flagged by
	// checkPodConfig; only a missing one is merely pending here.
	var missing []string
	for k := range dr.Live {
		p := strings.TrimPrefix(k, keys.ConfigAnnotationPrefix)
		pr.Pending = append(pr.Pending, p)
		if _, ok := pod.Annotations[k]; !ok {
			missing = append(missing, p)
		}
	}
	sort.Strings(pr.Pending)
	sort.Strings(missing)
	pr.Current = dr.Current() && pr.Revision == d.cat.Revision
	switch {
	case len(dr.Stale) > 0:
		g.failPod(pr, fmt.Sprintf("%s: stale: injected [%s] at catalog revision %s, the catalog is at %s: %s",
			id, strings.Join(pr.Plugins, ", "), pr.Revision, d.cat.Revision, dr.StaleMessage()),
			"restart it to apply the catalog: "+d.restartHint(ctx, pod))
	case len(missing) > 0:
		g.failPod(pr, fmt.Sprintf("%s: plugin.yaml of %s not yet updated to catalog revision %s", id, strings.Join(missing, ", "), d.cat.Revision),
			"the reconciler updates it live: is it on (reconciler.enabled) and leading? See the reconciler group below")
	case len(pr.Pending) > 0:
		// Its config differs: checkPodConfig's line says so, once.
	default:
		g.passPod(pr, fmt.Sprintf("%s: injected [%s], current with catalog revision %s", id, strings.Join(pr.Plugins, ", "), d.cat.Revision))
	}
	d.checkSidecars(g, pod, pr, dr.Status)
	return true
}

// checkSidecars reports restarts of the containers the injector owns and how
// each last ended.
func (d *doctor) checkSidecars(g *checkGroup, pod *corev1.Pod, pr *podReport, st inject.Status) {
	owned := append(append([]string{}, st.InitContainers...), st.Containers...)
	for _, cs := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if !slices.Contains(owned, cs.Name) || cs.RestartCount == 0 {
			continue
		}
		if pr.Restarts == nil {
			pr.Restarts = map[string]int32{}
		}
		pr.Restarts[cs.Name] = cs.RestartCount
		last := "unknown"
		if t := cs.LastTerminationState.Terminated; t != nil {
			last = fmt.Sprintf("%s (exit %d) at %s", t.Reason, t.ExitCode, t.FinishedAt.UTC().Format(time.RFC3339))
		}
		hint := "kubectl -n " + pod.Namespace + " logs " + pod.Name + " -c " + cs.Name + " --previous"
		if t := cs.LastTerminationState.Terminated; t != nil && t.Reason == "OOMKilled" {
			hint += "; raise the plugin's memory limit in the catalog (resources)"
		}
		g.fail(fmt.Sprintf("%s/%s: container %s restarted %d time(s); last ended %s", pod.Namespace, pod.Name, cs.Name, cs.RestartCount, last), hint)
		g.Checks[len(g.Checks)-1].podID = pod.Namespace + "/" + pod.Name
	}
}

// restartHint names the command that replaces the pod: a rollout restart of
// its workload only when the cluster proves that workload owns the pod (the
// reconciler's proof: a pod may name any ReplicaSet as its controller, and a
// hint to restart someone else's Deployment is how an admin would be led to
// do it), else deleting the pod, with the reason.
func (d *doctor) restartHint(ctx context.Context, pod *corev1.Pod) string {
	owner, err := reconcile.ProveOwner(ctx, d.client, pod)
	switch {
	case err == nil && owner.Deployment != nil:
		return "kubectl -n " + pod.Namespace + " rollout restart deployment/" + owner.Ref.Name + " (or set reconciler.rollout=auto)"
	case err == nil && owner.Ref != nil:
		return "kubectl -n " + pod.Namespace + " rollout restart " + strings.ToLower(owner.Ref.Kind) + "/" + owner.Ref.Name
	case err != nil:
		return "kubectl -n " + pod.Namespace + " delete pod " + pod.Name + " (its owner cannot be read: " + err.Error() + ")"
	case owner.Reason != "":
		return "kubectl -n " + pod.Namespace + " delete pod " + pod.Name + " (its owner is not proven: " + owner.Reason + ")"
	}
	return "kubectl -n " + pod.Namespace + " delete pod " + pod.Name
}

// checkReconciler: with the chart's reconciler on, some replica holds its
// Lease and renews it.
func (d *doctor) checkReconciler(ctx context.Context) {
	if d.injector == nil {
		return
	}
	on := false
	name := "cmp-injector-reconciler"
	for _, c := range d.injector.Spec.Template.Spec.Containers {
		for _, a := range c.Args {
			if a == "--reconcile" {
				on = true
			}
			if v, ok := strings.CutPrefix(a, "--leader-election-name="); ok {
				name = v
			}
		}
	}
	g := d.report.group("reconciler")
	if !on {
		g.pass("off (reconciler.enabled=false): catalog changes reach pods when they are restarted")
		return
	}
	lease, err := d.client.CoordinationV1().Leases(d.namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		g.fail("no replica has taken the Lease "+d.namespace+"/"+name+": nothing keeps pods current",
			"kubectl -n "+d.namespace+" logs -l app.kubernetes.io/name=cmp-injector | grep -i lease (RBAC: the chart's Role grants leases get/create/update)")
		return
	}
	if err != nil {
		g.fail("Lease "+d.namespace+"/"+name+": "+err.Error(), "")
		return
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	dur := 15 * time.Second
	if lease.Spec.LeaseDurationSeconds != nil {
		dur = time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	}
	if holder == "" || lease.Spec.RenewTime == nil || d.now.Sub(lease.Spec.RenewTime.Time) > 2*dur {
		g.fail("the Lease "+d.namespace+"/"+name+" is not being renewed (holder "+holder+")", "kubectl -n "+d.namespace+" get pods -l app.kubernetes.io/name=cmp-injector; their logs say why")
		return
	}
	g.pass(fmt.Sprintf("replica %s leads, Lease renewed %s ago", holder, d.now.Sub(lease.Spec.RenewTime.Time).Round(time.Second)))
}
