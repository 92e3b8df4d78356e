package doctor

import (
	"context"
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/policy"
)

// findPolicies collects the MutatingAdmissionPolicies cmp-injector rendered
// (policy mode), known by the catalog revision they carry. An API server
// that does not serve them (before 1.36) has none.
func (d *doctor) findPolicies(ctx context.Context) {
	list, err := d.client.AdmissionregistrationV1().MutatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
	if err != nil {
		if !apierrors.IsNotFound(err) {
			d.policiesErr = err
		}
		return
	}
	for i := range list.Items {
		if _, ok := list.Items[i].Annotations[keys.PolicyRevisionAnnotation]; ok {
			d.policies = append(d.policies, list.Items[i].DeepCopy())
		}
	}
}

// policyMode reports whether the cluster injects by policy alone: no webhook
// of ours, and policies of ours.
func (d *doctor) policyMode() bool { return len(d.webhooks) == 0 && len(d.policies) > 0 }

// checkMode says which mode the cluster runs.
func (d *doctor) checkMode() {
	g := d.report.group("admission")
	switch {
	case d.policiesErr != nil:
		g.fail(checkAdmissionMode, "cannot list MutatingAdmissionPolicies: "+d.policiesErr.Error(), "")
	case len(d.webhooks) > 0 && len(d.policies) > 0:
		g.fail(checkAdmissionMode, fmt.Sprintf("both modes: the webhook (%s) and the policies %s; a pod is injected by the policy and skipped by the webhook, which only checks it",
			d.webhooks[0].config, policyNames(d.policies)), "finish the switch: helm upgrade with one mode (the policies of a mode=policy release are removed with kubectl delete mutatingadmissionpolicy,validatingadmissionpolicy NAME)")
	case len(d.policies) > 0:
		g.pass(checkAdmissionMode, "policy mode: the API server injects with "+policyNames(d.policies)+"; no webhook is called")
	case len(d.webhooks) > 0:
		g.pass(checkAdmissionMode, "webhook mode: "+d.webhooks[0].config)
	}
}

func policyNames(ps []*admissionv1.MutatingAdmissionPolicy) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = "MutatingAdmissionPolicy " + p.Name
	}
	return strings.Join(names, ", ")
}

// checkPolicies checks each policy of ours against the catalog: its
// ValidatingAdmissionPolicy and both bindings exist, and both policies are
// what the catalog renders now (complete for it).
func (d *doctor) checkPolicies(ctx context.Context) {
	if len(d.policies) == 0 {
		return
	}
	g := d.report.group("policy")
	api := d.client.AdmissionregistrationV1()
	for _, m := range d.policies {
		name := m.Name
		v, err := api.ValidatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			g.fail(checkPolicyBindings, "ValidatingAdmissionPolicy "+name+": "+err.Error()+": pods the catalog refuses are admitted uninjected",
				"the injector Deployment applies it (cmp-injector policy --apply --watch): kubectl -n "+d.namespace+" logs deploy/"+name)
			continue
		}
		mb, errM := api.MutatingAdmissionPolicyBindings().Get(ctx, name, metav1.GetOptions{})
		vb, errV := api.ValidatingAdmissionPolicyBindings().Get(ctx, name, metav1.GetOptions{})
		switch {
		case errM != nil || errV != nil:
			g.fail(checkPolicyBindings, fmt.Sprintf("the bindings of %s: %v, %v: the policies match no pod", name, errM, errV),
				"the chart renders them (mode: policy); reinstall it")
		case mb.Spec.PolicyName != name || vb.Spec.PolicyName != name:
			g.fail(checkPolicyBindings, fmt.Sprintf("the bindings %s name the policies %q and %q", name, mb.Spec.PolicyName, vb.Spec.PolicyName), "")
		default:
			sel, _ := metav1.LabelSelectorAsSelector(mb.Spec.MatchResources.NamespaceSelector)
			g.pass(checkPolicyBindings, fmt.Sprintf("%s is bound to pods in namespaces matching %q", name, sel.String()))
		}
		if d.cat == nil {
			continue // catalog.valid said why
		}
		want := policy.Render(d.cat, policy.Options{Name: name})
		rev := m.Annotations[keys.PolicyRevisionAnnotation]
		if !samePolicy(m, v, want) {
			g.fail(checkPolicyCurrent, fmt.Sprintf("%s was rendered from catalog revision %s; the catalog is at %s and renders other policies: new pods get the old catalog's sidecars", name, rev, d.cat.Revision),
				"the injector Deployment applies a catalog within seconds of its ConfigMap changing: is it running? kubectl -n "+d.namespace+" logs deploy/"+name)
			continue
		}
		g.pass(checkPolicyCurrent, fmt.Sprintf("%s is complete for the catalog (revision %s, plugins %s)", name, d.cat.Revision, strings.Join(d.cat.Names, ", ")))
	}
}

// samePolicy compares what decides admission: the expressions, not the
// defaults the API server fills in.
func samePolicy(m *admissionv1.MutatingAdmissionPolicy, v *admissionv1.ValidatingAdmissionPolicy, want *policy.Set) bool {
	return equality.Semantic.DeepEqual(m.Spec.Variables, want.Mutating.Spec.Variables) &&
		equality.Semantic.DeepEqual(m.Spec.Mutations, want.Mutating.Spec.Mutations) &&
		equality.Semantic.DeepEqual(m.Spec.MatchConditions, want.Mutating.Spec.MatchConditions) &&
		equality.Semantic.DeepEqual(v.Spec.Variables, want.Validating.Spec.Variables) &&
		equality.Semantic.DeepEqual(v.Spec.Validations, want.Validating.Spec.Validations) &&
		equality.Semantic.DeepEqual(v.Spec.MatchConditions, want.Validating.Spec.MatchConditions)
}
