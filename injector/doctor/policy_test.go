package doctor

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/policy"
)

// policyInstall is healthy in policy mode: no webhook, the chart's Deployment
// running cmp-injector policy, and the four policy objects rendered from its
// catalog (edit changes the set before it is stored).
func policyInstall(t *testing.T, edit func(*policy.Set)) *fake.Clientset {
	t.Helper()
	in := healthy(t)
	in.dep.Spec.Template.Spec.Containers[0].Args = []string{"policy", "--catalog=/etc/cmp-injector/catalog.yaml", "--apply", "--watch", "--bindings=false", "--name=" + in.dep.Name}
	c := in.client()
	ctx := context.Background()
	api := c.AdmissionregistrationV1()
	if err := api.MutatingWebhookConfigurations().Delete(ctx, in.mwc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Parse([]byte(in.cm.Data["catalog.yaml"]))
	if err != nil {
		t.Fatal(err)
	}
	set := policy.Render(cat, policy.Options{Name: in.dep.Name})
	if edit != nil {
		edit(set)
	}
	if _, err := api.MutatingAdmissionPolicies().Create(ctx, set.Mutating, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.ValidatingAdmissionPolicies().Create(ctx, set.Validating, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if set.MutatingBinding != nil {
		if _, err := api.MutatingAdmissionPolicyBindings().Create(ctx, set.MutatingBinding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, set.ValidatingBinding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPolicyModeHealthy(t *testing.T) {
	r := runOn(t, policyInstall(t, nil), Options{})
	out := text(r)
	if !r.OK {
		t.Fatalf("a healthy policy-mode install:\n%s", out)
	}
	for id, want := range map[string]string{
		"admission.mode":  "policy mode",
		"policy.bindings": "is bound to pods in namespaces matching",
		"policy.current":  "is complete for the catalog",
	} {
		got := results(r, id)
		if len(got) != 1 || !got[0].OK || !strings.Contains(got[0].Message, want) {
			t.Errorf("%s: %+v, want one pass saying %q", id, got, want)
		}
	}
	if got := results(r, "webhook.configured"); len(got) != 0 {
		t.Errorf("policy mode was checked for a webhook: %+v", got)
	}
}

func TestPolicyModeStale(t *testing.T) {
	r := runOn(t, policyInstall(t, func(s *policy.Set) {
		s.Mutating.Spec.Variables = s.Mutating.Spec.Variables[:len(s.Mutating.Spec.Variables)-1]
		s.Mutating.Annotations["cmp-injector.io/catalog-revision"] = "older"
	}), Options{})
	got := results(r, "policy.current")
	if r.OK || len(got) != 1 || got[0].OK || !strings.Contains(got[0].Message, "rendered from catalog revision older") {
		t.Errorf("policy.current on a policy of another catalog: %+v\n%s", got, text(r))
	}
}

func TestPolicyModeUnbound(t *testing.T) {
	r := runOn(t, policyInstall(t, func(s *policy.Set) { s.MutatingBinding = nil }), Options{})
	got := results(r, "policy.bindings")
	if r.OK || len(got) != 1 || got[0].OK || !strings.Contains(got[0].Message, "match no pod") {
		t.Errorf("policy.bindings without the mutating binding: %+v", got)
	}
}

func TestBothModesFail(t *testing.T) {
	in := healthy(t)
	c := in.client()
	cat, err := catalog.Parse([]byte(in.cm.Data["catalog.yaml"]))
	if err != nil {
		t.Fatal(err)
	}
	set := policy.Render(cat, policy.Options{Name: in.dep.Name})
	if _, err := c.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(context.Background(), set.Mutating, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := results(runOn(t, c, Options{}), "admission.mode")
	if len(got) != 1 || got[0].OK || !strings.Contains(got[0].Message, "both modes") {
		t.Errorf("admission.mode with a webhook and a policy: %+v", got)
	}
}
