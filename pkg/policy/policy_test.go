package policy

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/test/golden"
)

func loadCatalog(t *testing.T, path string) *catalog.Catalog {
	t.Helper()
	cat, err := catalog.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// TestRenderGolden keeps the policies written from the library's catalog in
// testdata, so a change to what the API server evaluates is seen in review.
// The API server itself runs them in test/e2e (TestPolicyMatchesWebhook).
func TestRenderGolden(t *testing.T) {
	for _, c := range []struct{ catalog, golden string }{
		{"../../deploy/plugins/catalog.yaml", "library-policy.yaml"},
		{"../../injector/testdata/golden/classic.catalog.yaml", "classic-policy.yaml"},
	} {
		set := Render(loadCatalog(t, c.catalog), Options{})
		b, err := set.YAML()
		if err != nil {
			t.Fatal(err)
		}
		golden.Check(t, filepath.Join("testdata", c.golden), b)
	}
}

var varRef = regexp.MustCompile(`variables\.([A-Za-z_][A-Za-z0-9_]*)`)

// TestVariablesDefinedBeforeUse reads every expression of both policies for
// a variable that is not defined, or defined only after it is read: the API
// server would refuse the policy (or, worse, the expression would fail at
// admission), and this says which one without an API server.
func TestVariablesDefinedBeforeUse(t *testing.T) {
	files, _ := filepath.Glob("../../injector/testdata/golden/*.catalog.yaml")
	files = append(files, "../../deploy/plugins/catalog.yaml", "../../injector/testdata/catalog.yaml")
	for _, f := range files {
		set := Render(loadCatalog(t, f), Options{})
		check := func(policy string, names []string, exprs []string, final []string) {
			for i, e := range exprs {
				for _, m := range varRef.FindAllStringSubmatch(e, -1) {
					if j := slices.Index(names, m[1]); j < 0 || j >= i {
						t.Errorf("%s: %s: variable %s reads variables.%s, which is not defined before it", f, policy, names[i], m[1])
					}
				}
			}
			for _, e := range final {
				for _, m := range varRef.FindAllStringSubmatch(e, -1) {
					if !slices.Contains(names, m[1]) {
						t.Errorf("%s: %s reads variables.%s, which is not defined", f, policy, m[1])
					}
				}
			}
		}
		var names, exprs []string
		for _, v := range set.Mutating.Spec.Variables {
			names, exprs = append(names, v.Name), append(exprs, v.Expression)
		}
		check("MutatingAdmissionPolicy", names, exprs, []string{set.Mutating.Spec.Mutations[0].JSONPatch.Expression})
		names, exprs = nil, nil
		for _, v := range set.Validating.Spec.Variables {
			names, exprs = append(names, v.Name), append(exprs, v.Expression)
		}
		check("ValidatingAdmissionPolicy", names, exprs, []string{set.Validating.Spec.Validations[0].Expression, set.Validating.Spec.Validations[0].MessageExpression})
		// Match conditions cannot read variables at all.
		for _, mc := range append(set.Mutating.Spec.MatchConditions, set.Validating.Spec.MatchConditions...) {
			if strings.Contains(mc.Expression, "variables.") {
				t.Errorf("%s: match condition %s reads a variable: %s", f, mc.Name, mc.Expression)
			}
		}
	}
}

// TestRenderHasNoSentinel: every part built with a sentinel UID or image
// had it replaced by its expression.
func TestRenderHasNoSentinel(t *testing.T) {
	for _, f := range []string{"../../deploy/plugins/catalog.yaml", "../../injector/testdata/golden/classic.catalog.yaml", "../../injector/testdata/golden/openshift-assigned.catalog.yaml"} {
		b, err := Render(loadCatalog(t, f), Options{Name: "x"}).YAML()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{sentinelImage, fmt.Sprint(sentinelUID)} {
			if strings.Contains(string(b), s) {
				t.Errorf("%s: the rendered policies still hold the sentinel %s", f, s)
			}
		}
	}
}

func TestRenderNamesAndBindings(t *testing.T) {
	set := Render(loadCatalog(t, "../../deploy/plugins/catalog.yaml"), Options{Name: "argocd-cmp", Labels: map[string]string{"app": "x"}})
	if got := len(set.Objects()); got != 4 {
		t.Fatalf("%d objects, want 4", got)
	}
	for _, o := range set.Objects() {
		if kind := o.GetObjectKind().GroupVersionKind(); kind.Group != "admissionregistration.k8s.io" || kind.Version != "v1" {
			t.Errorf("object of kind %v", kind)
		}
	}
	if set.MutatingBinding.Spec.PolicyName != "argocd-cmp" || set.ValidatingBinding.Spec.PolicyName != "argocd-cmp" {
		t.Errorf("bindings name %q and %q, want argocd-cmp", set.MutatingBinding.Spec.PolicyName, set.ValidatingBinding.Spec.PolicyName)
	}
	if set.Mutating.Labels["app"] != "x" || set.Mutating.Annotations["cmp-injector.io/catalog-revision"] == "" {
		t.Errorf("metadata %+v", set.Mutating.ObjectMeta)
	}
	set.MutatingBinding, set.ValidatingBinding = nil, nil
	if got := len(set.Objects()); got != 2 {
		t.Errorf("without bindings: %d objects, want 2", got)
	}
}
