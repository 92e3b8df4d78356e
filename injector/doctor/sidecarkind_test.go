package doctor

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"
)

// catalogWith is the test catalog with defaults.nativeSidecars set to value.
func catalogWith(t *testing.T, value string) string {
	t.Helper()
	b, err := os.ReadFile("../testdata/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Replace(string(b), "  nativeSidecars: true\n", "  nativeSidecars: "+value+"\n", 1)
	if body == string(b) && value != "true" {
		t.Fatal("the test catalog does not set nativeSidecars: true")
	}
	path := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The API server's answers to the dry run.
var (
	accepted = error(nil)
	// What v1.28 with the SidecarContainers gate off (and v1.29-v1.32 with
	// it turned off) answers: restartPolicy dropped, the lifecycle refused.
	refused = apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", field.ErrorList{field.Forbidden(
		field.NewPath("spec", "initContainers").Index(0).Child("lifecycle"), "may not be set for init containers without restartPolicy=Always")})
	forbidden = apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "",
		errors.New(`user "viewer" cannot create resource "pods" in API group "" in the namespace "argocd"`))
	otherInvalid = apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", field.ErrorList{field.Required(field.NewPath("spec", "nodeName"), "a policy wants it")})
)

// catalog.native-sidecars asks the API server by a dry run, as the injector
// does for auto, and judges by its answer, not its version: v1.28 with the
// SidecarContainers gate on passes, v1.32 with it off fails. The version
// decides only when doctor may not create pods.
func TestNativeSidecarsByDryRun(t *testing.T) {
	native, classic, auto := catalogWith(t, "true"), catalogWith(t, "false"), catalogWith(t, "auto")
	for _, c := range []struct {
		name, version, catalog string
		answer                 error
		ok                     bool
		says                   string
	}{
		{"v1.28 with the gate on", "v1.28.15", native, accepted, true, "accepts an init container with restartPolicy: Always"},
		{"v1.32 with the gate off", "v1.32.13", native, refused, false, "refuses native sidecars: Pod \"p\" is invalid: spec.initContainers[0].lifecycle: Forbidden"},
		{"auto, accepted", "v1.28.15", auto, accepted, true, "auto, which the injector resolves at start-up as doctor did: native sidecars"},
		{"auto, refused", "v1.37.2", auto, refused, true, "auto, which the injector resolves at start-up as doctor did: classic sidecars"},
		{"classic", "v1.27.16", classic, refused, true, "classic sidecars (defaults.nativeSidecars: false)"},
		{"forbidden, v1.27", "v1.27.16", native, forbidden, false, "so by its version: the catalog injects native sidecars, which Kubernetes 1.27 does not have"},
		{"forbidden, v1.28", "v1.28.15-eks-1", native, forbidden, false, "SidecarContainers feature gate"},
		{"forbidden, v1.29", "v1.29.0", native, forbidden, true, "native sidecars on Kubernetes 1.29"},
		{"forbidden, auto", "v1.28.15", auto, forbidden, true, "which doctor may not make"},
		{"refused for something else", "v1.37.2", native, otherInvalid, false, "cannot tell whether the API server accepts native sidecars"},
	} {
		cl := healthy(t).client()
		cl.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: c.version}
		var asked []string
		cl.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			ca := a.(k8stesting.CreateActionImpl)
			asked = append(asked, ca.GetNamespace())
			if c.answer != nil {
				return true, nil, c.answer
			}
			return true, ca.GetObject(), nil
		})
		r := runOn(t, cl, Options{CatalogFile: c.catalog})
		res := results(r, checkCatalogSidecarKind.ID)
		if len(res) != 1 || res[0].OK != c.ok || !strings.Contains(res[0].Message, c.says) {
			t.Errorf("%s: %+v, want ok=%v saying %q", c.name, res, c.ok, c.says)
			continue
		}
		if want := map[bool]int{true: 0, false: 1}[c.catalog == classic]; len(asked) != want || (want == 1 && asked[0] != "argocd") {
			t.Errorf("%s: dry runs in %v, want %d in argocd (the catalog's repo-server namespace)", c.name, asked, want)
		}
		hint := "defaults.nativeSidecars: false"
		if errors.Is(c.answer, otherInvalid) {
			hint = "see what refused the pod"
		}
		if !c.ok && (r.OK || !strings.Contains(text(r), hint)) {
			t.Errorf("%s: the report passes or lacks the hint:\n%s", c.name, text(r))
		}
	}
}
