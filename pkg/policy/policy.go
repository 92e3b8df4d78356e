// Package policy writes the catalog as admission policies the API server
// evaluates itself (Kubernetes 1.36+, or 1.34-1.35 with the beta API on): a
// MutatingAdmissionPolicy that adds what the webhook adds, and a
// ValidatingAdmissionPolicy that refuses what the webhook refuses, each
// with its binding. No Deployment, certificate or network hop is then in the
// way of a repo-server pod being created.
//
// The catalog is written into the policies as CEL literals, built from the
// objects pkg/inject adds (its Parts), so a catalog change is a change of the
// policies; no parameter object is needed, and none can fall out of step.
package policy

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// DefaultName names the policies and their bindings.
const DefaultName = "cmp-injector"

// Options say how the policies are named and labelled.
type Options struct {
	// Name of the four objects; DefaultName when empty.
	Name string
	// Labels are put on each object (the chart's, for example).
	Labels map[string]string
}

// Set is the four objects policy mode installs.
type Set struct {
	Mutating          *admissionregistrationv1.MutatingAdmissionPolicy
	MutatingBinding   *admissionregistrationv1.MutatingAdmissionPolicyBinding
	Validating        *admissionregistrationv1.ValidatingAdmissionPolicy
	ValidatingBinding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
}

// Objects lists the set in the order to apply it, a binding after its
// policy; a binding set to nil (the chart renders its own) is left out.
func (s *Set) Objects() []runtime.Object {
	out := []runtime.Object{s.Validating}
	if s.ValidatingBinding != nil {
		out = append(out, s.ValidatingBinding)
	}
	out = append(out, s.Mutating)
	if s.MutatingBinding != nil {
		out = append(out, s.MutatingBinding)
	}
	return out
}

// YAML is the set as one multi-document YAML stream.
func (s *Set) YAML() ([]byte, error) {
	var out []byte
	for i, o := range s.Objects() {
		b, err := yaml.Marshal(o)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out = append(out, "---\n"...)
		}
		out = append(out, b...)
	}
	return out, nil
}

// Render writes cat as the policy set.
func Render(cat *catalog.Catalog, opts Options) *Set {
	name := opts.Name
	if name == "" {
		name = DefaultName
	}
	prog := newProgram(cat)
	meta := func() metav1.ObjectMeta {
		labels := map[string]string{}
		for k, v := range opts.Labels {
			labels[k] = v
		}
		return metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{keys.PolicyRevisionAnnotation: cat.Revision}}
	}
	fail := admissionregistrationv1.Fail
	match := &admissionregistrationv1.MatchResources{
		ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
		}}},
	}
	conditions := []admissionregistrationv1.MatchCondition{
		{Name: "repo-server-pods", Expression: prog.matchRepoServer()},
		{Name: "not-yet-injected", Expression: matchNotInjected},
	}
	// The webhook's selectors: namespaces and pods opted in by label.
	bound := &admissionregistrationv1.MatchResources{
		NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: keys.NamespaceEnabledLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{keys.EnabledValue}}}},
		ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: keys.InjectLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{keys.EnabledValue}}}},
	}
	vars := func(vs []variable) []admissionregistrationv1.Variable {
		out := make([]admissionregistrationv1.Variable, len(vs))
		for i, v := range vs {
			out[i] = admissionregistrationv1.Variable{Name: v.name, Expression: v.expr}
		}
		return out
	}
	set := &Set{
		Mutating: &admissionregistrationv1.MutatingAdmissionPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicy"},
			ObjectMeta: meta(),
			Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
				MatchConstraints: match.DeepCopy(),
				MatchConditions:  conditions,
				Variables:        vars(append(append([]variable{}, prog.deciding...), prog.adding...)),
				Mutations: []admissionregistrationv1.Mutation{{
					PatchType: admissionregistrationv1.PatchTypeJSONPatch,
					JSONPatch: &admissionregistrationv1.JSONPatch{Expression: prog.patch},
				}},
				FailurePolicy: &fail,
				// Once: what it adds is what the pod had when it arrived
				// here, as the webhook's patch is.
				ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			},
		},
		MutatingBinding: &admissionregistrationv1.MutatingAdmissionPolicyBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicyBinding"},
			ObjectMeta: meta(),
			Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: name, MatchResources: bound.DeepCopy()},
		},
		Validating: &admissionregistrationv1.ValidatingAdmissionPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicy"},
			ObjectMeta: meta(),
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				MatchConstraints: match.DeepCopy(),
				// After the mutating policy has injected a pod it carries the
				// status, and is not checked again: only a pod the mutating
				// policy left alone because of a problem reaches this.
				MatchConditions: conditions,
				Variables:       vars(prog.deciding),
				Validations: []admissionregistrationv1.Validation{{
					Expression:        "size(variables.problems) == 0",
					MessageExpression: quote(inject.DenyPrefix) + " + variables.problems.join(" + quote(inject.ProblemSeparator) + ")",
					Reason:            ptr(metav1.StatusReasonForbidden),
				}},
				FailurePolicy: &fail,
			},
		},
		ValidatingBinding: &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicyBinding"},
			ObjectMeta: meta(),
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, MatchResources: bound.DeepCopy(),
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
		},
	}
	return set
}

func ptr[T any](v T) *T { return &v }
