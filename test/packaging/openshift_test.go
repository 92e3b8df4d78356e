package packaging

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
)

// renderedCatalog is the catalog the chart renders with args.
func renderedCatalog(t *testing.T, args ...string) *catalog.Catalog {
	t.Helper()
	out, err := helmTemplate(t, append([]string{"--kube-version", "1.30.0", "--show-only", "templates/catalog-configmap.yaml"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Parse([]byte(docs(t, out)[0]["data"].(map[string]any)["catalog.yaml"].(string)))
	if err != nil {
		t.Fatalf("the rendered catalog does not load: %v", err)
	}
	return cat
}

// enabled is the catalog's plugins by namespace.
func enabled(cat *catalog.Catalog) map[string][]string {
	out := map[string][]string{}
	for _, ns := range cat.Namespaces() {
		out[ns] = cat.Enabled(ns)
	}
	return out
}

// catalog.namespaces replaces the default namespaces, it is not merged with
// them: a user who names openshift-gitops does not also enable argocd.
func TestNamespacesReplaceTheDefault(t *testing.T) {
	if got := enabled(renderedCatalog(t)); !reflect.DeepEqual(got, map[string][]string{"argocd": {"helm", "kustomize"}}) {
		t.Errorf("default namespaces %v, want argocd: helm, kustomize", got)
	}
	for name, args := range map[string][]string{
		"--set-json": {"--set-json", `catalog.namespaces={"team":["helm"]}`},
		"--set":      {"--set", "catalog.namespaces.team[0]=helm"},
	} {
		if got := enabled(renderedCatalog(t, args...)); !reflect.DeepEqual(got, map[string][]string{"team": {"helm"}}) {
			t.Errorf("%s: namespaces %v, want team alone", name, got)
		}
	}
}

// deploy/openshift/values.yaml, the README's OpenShift install, renders what
// restricted-v2 admits and what OpenShift GitOps needs: no fixed UID or GID
// anywhere in the injector's pod, sidecars that follow the assigned UID, and
// openshift-gitops as the only enabled namespace.
func TestOpenShiftValues(t *testing.T) {
	values := filepath.Join(repo(t), "deploy", "openshift", "values.yaml")
	out, err := helmTemplate(t, "--kube-version", "1.30.0", "-f", values)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range docs(t, out) {
		if obj["kind"] != "Deployment" {
			continue
		}
		spec := obj["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
		for _, key := range []string{"runAsUser", "runAsGroup"} {
			if sc, _ := spec["securityContext"].(map[string]any); sc != nil && sc[key] != nil {
				t.Errorf("the injector's pod sets %s %v, which restricted-v2 refuses", key, sc[key])
			}
			for _, c := range spec["containers"].([]any) {
				if sc, _ := c.(map[string]any)["securityContext"].(map[string]any); sc != nil && sc[key] != nil {
					t.Errorf("container %v sets %s %v", c.(map[string]any)["name"], key, sc[key])
				}
			}
		}
	}
	cat := renderedCatalog(t, "-f", values)
	// Under Assigned the sidecars' fallback UID is none (0): they take the
	// repo-server's, which OpenShift assigns.
	if cat.Defaults.RunAsUser != 0 {
		t.Errorf("the sidecars' fallback UID is %d, want none (runAsUserPolicy: Assigned)", cat.Defaults.RunAsUser)
	}
	if got := enabled(cat); !reflect.DeepEqual(got, map[string][]string{"openshift-gitops": {"helm", "kustomize"}}) {
		t.Errorf("namespaces %v, want openshift-gitops alone", got)
	}
}
