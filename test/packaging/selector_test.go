package packaging

import (
	"maps"
	"path/filepath"
	"testing"
)

// TestChartSelectsTheInjectorByItsService: what doctor relies on to find the
// injector's Deployment, whatever nameOverride and fullnameOverride made of
// the chart's names: the webhook's Service (or, with webhook.url, the Service
// named like the webhook configuration) selects the Deployment's pods. The
// cases and their names and labels are injector/doctor's chartRender fixtures
// (TestFindsTheInjectorAsTheChartRendersIt); a change here belongs there too.
func TestChartSelectsTheInjectorByItsService(t *testing.T) {
	for name, tc := range map[string]struct {
		release  string
		set      []string
		fullname string
		selector map[string]string
	}{
		"default": {release: "cmp-injector", fullname: "cmp-injector",
			selector: map[string]string{"app.kubernetes.io/name": "cmp-injector", "app.kubernetes.io/instance": "cmp-injector"}},
		"nameOverride": {release: "rel", set: []string{"nameOverride=injector"}, fullname: "rel-injector",
			selector: map[string]string{"app.kubernetes.io/name": "injector", "app.kubernetes.io/instance": "rel"}},
		"fullnameOverride": {release: "rel", set: []string{"fullnameOverride=webhook"}, fullname: "webhook",
			selector: map[string]string{"app.kubernetes.io/name": "cmp-injector", "app.kubernetes.io/instance": "rel"}},
		"nameOverride with webhook.url": {release: "rel", set: []string{"nameOverride=injector", "webhook.url=https://injector.example:8443/mutate"},
			fullname: "rel-injector", selector: map[string]string{"app.kubernetes.io/name": "injector", "app.kubernetes.io/instance": "rel"}},
	} {
		t.Run(name, func(t *testing.T) {
			r := repo(t)
			argv := []string{tool(t, "helm"), "template", tc.release, filepath.Join(r, "charts", "cmp-injector"),
				"--namespace", "cmp-injector", "--kube-version", "1.30.0"}
			for _, s := range tc.set {
				argv = append(argv, "--set", s)
			}
			objs := docs(t, run(t, r, argv...))
			byKind := map[string]map[string]any{}
			for _, o := range objs {
				byKind[o["kind"].(string)] = o
			}
			dep, svc, mwc := byKind["Deployment"], byKind["Service"], byKind["MutatingWebhookConfiguration"]
			if dep == nil || svc == nil || mwc == nil {
				t.Fatalf("no Deployment, Service or MutatingWebhookConfiguration among %v", kinds(objs))
			}
			for _, o := range []map[string]any{dep, svc, mwc} {
				if got := dig(o, "metadata", "name"); got != tc.fullname {
					t.Errorf("%s named %v, want %s", o["kind"], got, tc.fullname)
				}
			}
			if got := stringMap(dig(svc, "spec", "selector")); !maps.Equal(got, tc.selector) {
				t.Errorf("Service selector %v, want %v", got, tc.selector)
			}
			pods := stringMap(dig(dep, "spec", "template", "metadata", "labels"))
			for k, v := range tc.selector {
				if pods[k] != v {
					t.Errorf("the Deployment's pods are labelled %v: the Service selects %s=%s", pods, k, v)
				}
			}
			hook := dig(mwc, "webhooks").([]any)[0].(map[string]any)
			if ref := dig(hook, "clientConfig", "service"); ref != nil {
				if got := dig(hook, "clientConfig", "service", "name"); got != tc.fullname {
					t.Errorf("the webhook names the Service %v, want %s", got, tc.fullname)
				}
			} else if dig(hook, "clientConfig", "url") == nil {
				t.Errorf("the webhook has neither a Service nor a URL: %v", hook["clientConfig"])
			}
		})
	}
}

// dig is obj's value at path, nil where it has none.
func dig(obj any, path ...string) any {
	for _, p := range path {
		m, ok := obj.(map[string]any)
		if !ok {
			return nil
		}
		obj = m[p]
	}
	return obj
}

// stringMap is a YAML mapping of strings.
func stringMap(v any) map[string]string {
	out := map[string]string{}
	m, _ := v.(map[string]any)
	for k, v := range m {
		s, _ := v.(string)
		out[k] = s
	}
	return out
}
