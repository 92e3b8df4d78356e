package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
)

// Native sidecars on a cluster that has none: the API server refuses every
// injected pod (the version matrix saw it on v1.27.16), so doctor fails the
// catalog there and says what to change; classic sidecars pass everywhere.
func TestNativeSidecarsNeedKubernetes129(t *testing.T) {
	b, err := os.ReadFile("../testdata/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	classic := filepath.Join(t.TempDir(), "classic.yaml")
	body := strings.Replace(string(b), "  nativeSidecars: true\n", "  nativeSidecars: false\n", 1)
	if body == string(b) {
		t.Fatal("the test catalog does not set nativeSidecars: true")
	}
	if err := os.WriteFile(classic, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		version, catalog string
		ok               bool
		says             string
	}{
		{"v1.27.16", "../testdata/catalog.yaml", false, "Kubernetes 1.27 does not have"},
		{"v1.28.15-eks-1", "../testdata/catalog.yaml", false, "SidecarContainers feature gate"},
		{"v1.29.0", "../testdata/catalog.yaml", true, "1.29"},
		{"v1.37.2", "../testdata/catalog.yaml", true, "Kubernetes 1.37"},
		{"v1.27.16", classic, true, "classic sidecars"},
	} {
		cl := healthy(t).client()
		cl.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: c.version}
		r := runOn(t, cl, Options{CatalogFile: c.catalog})
		res := results(r, checkCatalogSidecarKind.ID)
		if len(res) != 1 || res[0].OK != c.ok || !strings.Contains(res[0].Message, c.says) {
			t.Errorf("%s, %s: %+v, want ok=%v saying %q", c.version, filepath.Base(c.catalog), res, c.ok, c.says)
			continue
		}
		if !c.ok && (r.OK || !strings.Contains(text(r), "defaults.nativeSidecars: false")) {
			t.Errorf("%s: the report passes or lacks the hint:\n%s", c.version, text(r))
		}
	}
}
