package doctor

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestFindsTheInjectorAsTheChartRendersIt: doctor finds the injector's
// Deployment whatever nameOverride and fullnameOverride made of the chart's
// names and selector labels, with no flag but --namespace, and its hints
// select the pods by those labels. The renders are written out as helm
// template makes them (see chartRender).
func TestFindsTheInjectorAsTheChartRendersIt(t *testing.T) {
	for name, tc := range map[string]struct {
		render chartRender
		url    bool
		// pods is the selector the hints must name, as kubectl -l takes it.
		pods string
	}{
		// helm install cmp-injector charts/cmp-injector -n cmp-injector
		"default": {render: defaultRender,
			pods: "app.kubernetes.io/instance=cmp-injector,app.kubernetes.io/name=cmp-injector"},
		// helm install rel charts/cmp-injector -n cmp-injector --set nameOverride=injector
		"nameOverride": {render: chartRender{fullname: "rel-injector",
			selector: map[string]string{"app.kubernetes.io/name": "injector", "app.kubernetes.io/instance": "rel"}},
			pods: "app.kubernetes.io/instance=rel,app.kubernetes.io/name=injector"},
		// helm install rel charts/cmp-injector -n cmp-injector --set fullnameOverride=webhook
		"fullnameOverride": {render: chartRender{fullname: "webhook",
			selector: map[string]string{"app.kubernetes.io/name": "cmp-injector", "app.kubernetes.io/instance": "rel"}},
			pods: "app.kubernetes.io/instance=rel,app.kubernetes.io/name=cmp-injector"},
		// ... --set nameOverride=injector --set webhook.url=https://...: the
		// webhook names no Service, the chart's is named like its
		// configuration.
		"nameOverride with webhook.url": {render: chartRender{fullname: "rel-injector",
			selector: map[string]string{"app.kubernetes.io/name": "injector", "app.kubernetes.io/instance": "rel"}},
			url: true, pods: "app.kubernetes.io/instance=rel,app.kubernetes.io/name=injector"},
	} {
		t.Run(name, func(t *testing.T) {
			in := healthyAs(t, tc.render)
			if tc.url {
				// Nothing listens there: the webhook checks fail, the
				// Deployment's are the ones this test reads.
				url := "https://127.0.0.1:1/mutate"
				in.mwc.Webhooks[0].ClientConfig = admissionv1.WebhookClientConfig{URL: &url, CABundle: in.bundle.CA}
			}
			r := runOn(t, in.client(), Options{})
			if tc.url {
				for _, id := range []string{"catalog.valid", "reconciler.lease"} {
					if res := results(r, id); len(res) != 1 || !res[0].OK {
						t.Errorf("%s: %+v\n%s", id, res, text(r))
					}
				}
			} else if !r.OK {
				t.Fatalf("a healthy install:\n%s", text(r))
			}

			breakIt := map[string]func(*fake.Clientset){
				"reconciler.lease": func(c *fake.Clientset) { deleteObj(c, "leases", installNS, leaseName) },
			}
			if !tc.url {
				breakIt["webhook.endpoints"] = func(c *fake.Clientset) { deleteObj(c, "endpointslices", installNS, tc.render.fullname+"-x") }
			}
			for id, b := range breakIt {
				c := in.client()
				b(c)
				r := runOn(t, c, Options{})
				res := results(r, id)
				if len(res) != 1 || res[0].OK || !selectsOnly(res[0].Hint, tc.pods) {
					t.Errorf("%s: want a failure whose hint selects -l %s:\n%s", id, tc.pods, text(r))
				}
			}
		})
	}
}

// selectsOnly: every kubectl -l in hint is followed by exactly selector.
func selectsOnly(hint, selector string) bool {
	parts := strings.Split(hint, " -l ")
	for _, p := range parts[1:] {
		rest, ok := strings.CutPrefix(p, selector)
		if !ok || rest != "" && rest[0] != ' ' && rest[0] != ';' {
			return false
		}
	}
	return len(parts) > 1
}
