package harness

import (
	"os"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// Each release's repo-server is the chain fixture with that release's image
// and the copyutil command of its own install.yaml.
func TestRepoServerPerRelease(t *testing.T) {
	fixture, err := os.ReadFile("../testdata/chain/argocd-repo-server.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for version, want := range map[string]string{
		"v3.6.1":   "sh -c /bin/cp /usr/local/bin/argocd /var/run/argocd/argocd && /bin/ln -sf /var/run/argocd/argocd /var/run/argocd/argocd-cmp-server",
		"v3.3.7":   "sh -c /bin/cp /usr/local/bin/argocd /var/run/argocd/argocd && /bin/ln -sf /var/run/argocd/argocd /var/run/argocd/argocd-cmp-server",
		"v3.3.2":   "sh -c /bin/cp --update=none /usr/local/bin/argocd /var/run/argocd/argocd && /bin/ln -s /var/run/argocd/argocd /var/run/argocd/argocd-cmp-server",
		"v3.2.11":  "/bin/cp -n /usr/local/bin/argocd /var/run/argocd/argocd-cmp-server",
		"v2.12.13": "/bin/cp -n /usr/local/bin/argocd /var/run/argocd/argocd-cmp-server",
	} {
		s := string(fixture)
		for from, to := range (ArgoRelease{Version: version}).RepoServerSubst() {
			if !strings.Contains(s, from) {
				t.Fatalf("the fixture lacks %q, which %s's repo-server replaces", from, version)
			}
			s = strings.ReplaceAll(s, from, to)
		}
		var dep appsv1.Deployment
		if err := yaml.UnmarshalStrict([]byte(s), &dep); err != nil {
			t.Fatalf("%s: %v", version, err)
		}
		c := dep.Spec.Template.Spec.InitContainers[0]
		if got := strings.Join(append(c.Command, c.Args...), " "); c.Name != "copyutil" || got != want || c.Image != ArgoImage+":"+version {
			t.Errorf("%s: %s runs %q (%s), want %q", version, c.Name, got, c.Image, want)
		}
	}
}
