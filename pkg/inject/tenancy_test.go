package inject

import (
	"strings"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// A catalog change of who may use a plugin (allowedProjects,
// allowedSourceRepos) travels inside the inline plugin.yaml, so a running
// pod takes it live through its config annotation (the kubelet re-projects
// it, the sidecar reloads): nothing about the pod is stale.
func TestTenancyChangeIsLive(t *testing.T) {
	p := injectedPod(t, "helm", nil)
	cat := catalogWith(t, "allowedImages:", "allowedProjects: [team-a]\n    allowedSourceRepos: ['https://github.com/org/*']\n    allowedImages:")
	d, err := CheckDrift(p, cat)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Stale) != 0 {
		t.Fatalf("stale: %s", d.StaleMessage())
	}
	got := d.Live[keys.ConfigAnnotationPrefix+"helm"]
	if !strings.Contains(got, "allowedProjects:\n  - team-a\n") || !strings.Contains(got, "allowedSourceRepos:\n  - https://github.com/org/*\n") {
		t.Errorf("the live config annotation does not carry the rules:\n%s", got)
	}
}
