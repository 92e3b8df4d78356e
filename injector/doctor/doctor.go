package doctor

import (
	"context"
	"fmt"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
)

// Options say what to check and how long to wait for it.
type Options struct {
	Client kubernetes.Interface
	// Host is the API server's address, for the messages.
	Host string
	// Namespace is where the injector is installed.
	Namespace string
	// CatalogFile judges pods against this file instead of the injector's
	// ConfigMap.
	CatalogFile string
	// Now is the clock certificates and the Lease are judged by (default
	// time.Now).
	Now func() time.Time
	// Wait: while every failed error is retryable, check again every
	// RetryEvery (default 2s) until this much time has passed or ctx ends.
	// 0 checks once.
	Wait, RetryEvery time.Duration
	// OnRetry, if set, is told before each new attempt what is still
	// failing.
	OnRetry func(failed []*Result, next time.Duration)
}

// Run checks the installation and returns the report of the last attempt.
func Run(ctx context.Context, o Options) *Report {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.RetryEvery <= 0 {
		o.RetryEvery = 2 * time.Second
	}
	deadline := o.Now().Add(o.Wait)
	for {
		d := &doctor{client: o.Client, host: o.Host, namespace: o.Namespace, catalogFile: o.CatalogFile, now: o.Now()}
		d.run(ctx)
		r := &d.report
		errs, _ := r.counts()
		r.OK = errs == 0
		if r.OK || !r.retryable() || !o.Now().Add(o.RetryEvery).Before(deadline) {
			return r
		}
		if o.OnRetry != nil {
			o.OnRetry(r.failed(), o.RetryEvery)
		}
		t := time.NewTimer(o.RetryEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return r
		case <-t.C:
		}
	}
}

// failed are the failed results of severity error.
func (r *Report) failed() []*Result {
	var out []*Result
	for _, g := range r.Groups {
		for _, c := range g.Checks {
			if !c.OK && c.Severity != Warning {
				out = append(out, c)
			}
		}
	}
	return out
}

// doctor is one attempt: what it found so far, and the objects later checks
// build on.
type doctor struct {
	client      kubernetes.Interface
	host        string
	namespace   string // where the injector is installed
	catalogFile string
	now         time.Time
	report      Report

	webhooks []webhookRef
	// webhooksErr is why the webhook configurations could not be listed.
	webhooksErr error
	// policies are ours (policy mode); policiesErr why they could not be
	// listed.
	policies    []*admissionv1.MutatingAdmissionPolicy
	policiesErr error
	// selector picks the injector's pods, as its Service does: the hints
	// name it for kubectl.
	selector labels.Selector
	// minor is the API server's Kubernetes minor version (0: unknown).
	minor    int
	injector *appsv1.Deployment
	cat      *catalog.Catalog
	enabled  map[string]bool
}

type webhookRef struct {
	config string
	hook   admissionv1.MutatingWebhook
}

func (d *doctor) run(ctx context.Context) {
	g := d.report.group("cluster")
	v, err := d.client.Discovery().ServerVersion()
	if err != nil {
		g.fail(checkAPIReachable, "cannot reach the API server at "+d.host+": "+err.Error(), "")
		return
	}
	g.pass(checkAPIReachable, fmt.Sprintf("API server %s, Kubernetes %s", d.host, v.GitVersion))
	d.minor = kubeMinor(v.GitVersion)
	d.findWebhooks(ctx)
	d.findPolicies(ctx)
	d.findInjector(ctx)
	d.checkMode()
	if !d.policyMode() {
		d.checkWebhooks(ctx)
	}
	d.checkCatalog(ctx)
	d.checkPolicies(ctx)
	d.checkNamespaces(ctx)
	d.checkPods(ctx)
	d.checkReconciler(ctx)
}

// defaultSelector picks the pods of a chart installed without nameOverride:
// the guess when nothing installed says otherwise.
var defaultSelector = labels.SelectorFromSet(labels.Set{"app.kubernetes.io/name": "cmp-injector"})

// findInjector finds the injector's Deployment in the install namespace: the
// one whose pods the webhook's Service selects. The chart's selector labels
// follow nameOverride and the release name, so only the Service it rendered
// knows them; with webhook.url the webhook names no Service, and the chart's
// Service is the one named like the webhook configuration.
func (d *doctor) findInjector(ctx context.Context) {
	deps, err := d.client.AppsV1().Deployments(d.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		deps = &appsv1.DeploymentList{}
	}
	var candidates []labels.Selector
	for _, w := range d.webhooks {
		name := w.config
		if s := w.hook.ClientConfig.Service; s != nil {
			if s.Namespace != d.namespace {
				continue
			}
			name = s.Name
		}
		svc, err := d.client.CoreV1().Services(d.namespace).Get(ctx, name, metav1.GetOptions{})
		// A Service without a selector selects nothing, not everything.
		if err == nil && len(svc.Spec.Selector) > 0 {
			candidates = append(candidates, labels.SelectorFromSet(svc.Spec.Selector))
		}
	}
	candidates = append(candidates, defaultSelector)
	d.selector = candidates[0]
	for _, sel := range candidates {
		for i := range deps.Items {
			if sel.Matches(labels.Set(deps.Items[i].Spec.Template.Labels)) {
				d.injector, d.selector = &deps.Items[i], sel
				return
			}
		}
	}
}
