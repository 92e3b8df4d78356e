package doctor

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// certWarnDays is when a serving certificate's expiry becomes a failure: the
// chart's cert-manager Certificate renews 30 days ahead, so 7 means renewal
// is not happening.
const certWarnDays = 7

// findWebhooks collects the injector's webhooks before anything is checked:
// they lead to the injector's Deployment (findInjector).
func (d *doctor) findWebhooks(ctx context.Context) {
	list, err := d.client.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		d.webhooksErr = err
		return
	}
	for _, c := range list.Items {
		for _, h := range c.Webhooks {
			if h.Name == keys.WebhookName {
				d.webhooks = append(d.webhooks, webhookRef{config: c.Name, hook: h})
			}
		}
	}
}

func (d *doctor) checkWebhooks(ctx context.Context) {
	g := d.report.group("webhook")
	if d.webhooksErr != nil {
		g.fail(checkWebhookListable, "cannot list MutatingWebhookConfigurations: "+d.webhooksErr.Error(), "")
		return
	}
	if len(d.webhooks) == 0 {
		g.fail(checkWebhookConfigured, "no MutatingWebhookConfiguration has the webhook "+keys.WebhookName,
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
		g.pass(checkWebhookConfigured, fmt.Sprintf("%s: %s of pods in namespaces matching %q, failurePolicy %s", w.config, strings.Join(ops, ","), sel.String(), policy))
		if len(h.ClientConfig.CABundle) == 0 {
			g.fail(checkWebhookCABundle, w.config+": the caBundle is empty, so the API server cannot trust the injector", "")
			continue
		}
		switch {
		case h.ClientConfig.Service != nil:
			d.checkService(ctx, g, w)
		case h.ClientConfig.URL != nil:
			d.checkURL(ctx, g, w)
		}
	}
}

// checkService: the webhook's Service has ready endpoints, and the serving
// certificate in the injector's TLS Secret is one the caBundle verifies.
func (d *doctor) checkService(ctx context.Context, g *Group, w webhookRef) {
	svc := w.hook.ClientConfig.Service
	ref := svc.Namespace + "/" + svc.Name
	service, err := d.client.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
	if err != nil {
		g.fail(checkWebhookService, "webhook Service "+ref+": "+err.Error(), "")
		return
	}
	// The endpoints are the pods this Service selects, whichever
	// Deployment findInjector settled on.
	pods := d.selector.String()
	if len(service.Spec.Selector) > 0 {
		pods = labels.SelectorFromSet(service.Spec.Selector).String()
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
		g.fail(checkWebhookEndpoints, "webhook Service "+ref+" has no ready endpoints: pods that ask for plugins are refused (failurePolicy Fail) or start without them (Ignore)",
			"kubectl -n "+svc.Namespace+" get pods -l "+pods+"; kubectl -n "+svc.Namespace+" describe pods -l "+pods)
	} else {
		g.pass(checkWebhookEndpoints, fmt.Sprintf("webhook Service %s has %d ready endpoint(s)", ref, ready))
	}
	cg := d.report.group("certificates")
	if d.injector == nil {
		cg.fail(checkCertSource, "no injector Deployment in namespace "+d.namespace+" to read the serving certificate from", "")
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
		cg.fail(checkCertSecret, "serving certificate Secret "+d.namespace+"/"+secret+": "+err.Error(), "with certificates.mode=certManager: kubectl -n "+d.namespace+" describe certificate")
		return
	}
	cert, err := parseCert(s.Data["tls.crt"])
	if err != nil {
		cg.fail(checkCertSecret, "Secret "+d.namespace+"/"+secret+" tls.crt: "+err.Error(), "recreate it: cmp-injector certs --service ... --secret-name "+secret)
		return
	}
	d.checkCert(cg, w, cert, svc.Name+"."+svc.Namespace+".svc", "Secret "+d.namespace+"/"+secret)
}

// checkURL: an injector outside the cluster (webhook.url) answers TLS with a
// certificate the caBundle verifies, and is ready. Both requests end with
// ctx (doctor's --timeout, or Ctrl-C) at the latest.
func (d *doctor) checkURL(ctx context.Context, g *Group, w webhookRef) {
	u, err := url.Parse(*w.hook.ClientConfig.URL)
	if err != nil {
		g.fail(checkWebhookURL, w.config+": webhook URL: "+err.Error(), "")
		return
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "443")
	}
	dialer := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second},
		Config: &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true}} //nolint:gosec // verified below against the caBundle, as the API server would
	conn, err := dialer.DialContext(ctx, "tcp", host)
	if err != nil {
		g.fail(checkWebhookReachable, w.config+": cannot connect to "+u.Host+": "+err.Error(), "")
		return
	}
	certs := conn.(*tls.Conn).ConnectionState().PeerCertificates
	conn.Close()
	g.pass(checkWebhookReachable, w.config+": the injector answers at "+u.Host)
	d.checkCert(d.report.group("certificates"), w, certs[0], u.Hostname(), "the certificate served at "+u.Host)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(w.hook.ClientConfig.CABundle)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}}}
	defer hc.CloseIdleConnections()
	ready := *u
	ready.Path = "/readyz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ready.String(), nil)
	if err != nil {
		return // the URL parsed above
	}
	resp, err := hc.Do(req)
	if err != nil {
		return // reported by the certificate check
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		g.fail(checkWebhookReady, fmt.Sprintf("%s: the injector is not ready (%s)", w.config, resp.Status), "")
		return
	}
	g.pass(checkWebhookReady, w.config+": the injector is ready")
}

// checkCert verifies cert against the webhook's caBundle for name, as the API
// server does, and reports how long it has left.
func (d *doctor) checkCert(g *Group, w webhookRef, cert *x509.Certificate, name, where string) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(w.hook.ClientConfig.CABundle) {
		g.fail(checkCertBundle, w.config+": the caBundle holds no PEM certificate", "")
		return
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: name, CurrentTime: d.now}); err != nil {
		g.fail(checkCertVerify, fmt.Sprintf("%s: the caBundle of %s does not verify %s for %s: %v", w.config, w.config, where, name, err), "")
		return
	}
	days := int(cert.NotAfter.Sub(d.now).Hours() / 24)
	msg := fmt.Sprintf("%s: the caBundle verifies %s for %s; it expires %s (%d days)", w.config, where, name, cert.NotAfter.Format(time.DateOnly), days)
	if days < certWarnDays {
		g.fail(checkCertExpiry, msg, "renew it now: cmp-injector certs --ca-dir ... (mode secret), or kubectl -n "+d.namespace+" describe certificate (mode certManager)")
		return
	}
	g.pass(checkCertVerify, msg)
}

func parseCert(pemBytes []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(pemBytes)
	if b == nil {
		return nil, fmt.Errorf("no PEM certificate")
	}
	return x509.ParseCertificate(b.Bytes)
}
