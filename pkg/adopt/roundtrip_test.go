package adopt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/test/golden"
)

// TestRoundTrip: adopt of what the injector made from a workload and a
// catalog gives back an equivalent catalog (every plugin builds the same
// sidecar) and a workload that, injected with it, is the same pod as the
// first injection.
func TestRoundTrip(t *testing.T) {
	dir := filepath.Join(goldenDir, "roundtrip")
	checkRoundTrip(t, filepath.Join(dir, "source-catalog.yaml"), filepath.Join(dir, "source-workload.yaml"))
}

// TestRoundTripServerFromImages: the same, with every plugin's image
// carrying cmp-server (serverPath), so the injected pod has no copy init
// container: the adopted catalog keeps each serverPath and the copy image.
func TestRoundTripServerFromImages(t *testing.T) {
	dir := filepath.Join(goldenDir, "roundtrip")
	src, err := os.ReadFile(filepath.Join(dir, "source-catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	y := string(src)
	for _, image := range []string{"alpine/helm:3.16.2", "example.com/vault-cmp:1.2", "ghcr.io/example/tanka-cmp:0.28.0"} {
		old := "    image: " + image + "\n"
		if !strings.Contains(y, old) {
			t.Fatalf("source catalog has no %q", old)
		}
		y = strings.Replace(y, old, old+"    serverPath: /usr/local/bin/cmp-server\n", 1)
	}
	srcCatFile := filepath.Join(t.TempDir(), "source-catalog.yaml")
	if err := os.WriteFile(srcCatFile, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	if first := injected(t, filepath.Join(dir, "source-workload.yaml"), srcCatFile); strings.Contains(string(first), "cmp-injector-copy") {
		t.Fatalf("the source catalog still copies the server:\n%s", first)
	}
	checkRoundTrip(t, srcCatFile, filepath.Join(dir, "source-workload.yaml"))
}

func checkRoundTrip(t *testing.T, srcCatFile, srcWorkload string) {
	t.Helper()
	first := injected(t, srcWorkload, srcCatFile)
	r, err := Adopt(first, goldenOptions)
	if err != nil {
		t.Fatal(err)
	}
	if r.Lost() {
		t.Fatalf("round trip lost something: %+v", r.Findings)
	}
	src, err := catalog.Load(srcCatFile)
	if err != nil {
		t.Fatal(err)
	}
	got, err := catalog.Parse(r.Catalog)
	if err != nil {
		t.Fatalf("adopted catalog does not load: %v", err)
	}
	assertEquivalent(t, src, got)

	tmp := t.TempDir()
	adoptedCat, adoptedWorkload := filepath.Join(tmp, "catalog.yaml"), filepath.Join(tmp, "workload.yaml")
	if err := os.WriteFile(adoptedCat, r.Catalog, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(adoptedWorkload, r.Workload, 0o600); err != nil {
		t.Fatal(err)
	}
	second := injected(t, adoptedWorkload, adoptedCat)
	a, b := podTemplate(t, first), podTemplate(t, second)
	if !equality.Semantic.DeepEqual(a.Spec, b.Spec) {
		ay, _ := yaml.Marshal(a.Spec)
		by, _ := yaml.Marshal(b.Spec)
		t.Errorf("re-injected pod differs from the first injection:\n%s", golden.Diff(string(ay), string(by)))
	}
	for k, v := range a.Annotations {
		if k == "cmp-injector.io/status" {
			continue // carries the catalog revision, a hash of the file
		}
		if b.Annotations[k] != v {
			t.Errorf("annotation %s: first %q, re-injected %q", k, v, b.Annotations[k])
		}
	}
}

func podTemplate(t *testing.T, stream []byte) *corev1.PodTemplateSpec {
	t.Helper()
	var d appsv1.Deployment
	if err := yaml.Unmarshal(stream, &d); err != nil {
		t.Fatal(err)
	}
	return &d.Spec.Template
}

// assertEquivalent: the same plugins, each building the same sidecar, in
// the same namespaces.
func assertEquivalent(t *testing.T, want, got *catalog.Catalog) {
	t.Helper()
	if !equality.Semantic.DeepEqual(want.Names, got.Names) {
		t.Fatalf("plugins: want %v, got %v", want.Names, got.Names)
	}
	for _, ns := range want.Namespaces() {
		if !equality.Semantic.DeepEqual(want.Enabled(ns), got.Enabled(ns)) {
			t.Errorf("namespace %s: want %v, got %v", ns, want.Enabled(ns), got.Enabled(ns))
		}
	}
	if want.Defaults.CopyImage != got.Defaults.CopyImage || want.Defaults.NativeSidecars != got.Defaults.NativeSidecars {
		t.Errorf("defaults: want %+v, got %+v", want.Defaults, got.Defaults)
	}
	for _, n := range want.Names {
		w, g := want.Plugins[n], got.Plugins[n]
		check := func(field string, a, b any) {
			if !equality.Semantic.DeepEqual(a, b) {
				t.Errorf("plugin %s %s: want %+v, got %+v", n, field, a, b)
			}
		}
		check("image", w.Image, g.Image)
		check("imagePullPolicy", w.ImagePullPolicy, g.ImagePullPolicy)
		check("env", w.Env, g.Env)
		check("envFrom", w.EnvFrom, g.EnvFrom)
		check("volumes", w.Volumes, g.Volumes)
		check("home", w.Home, g.Home)
		check("resources", want.ResourcesFor(w), got.ResourcesFor(g))
		check("tmpSizeLimit", want.TmpSizeLimitFor(w), got.TmpSizeLimitFor(g))
		check("inline config", w.InlineYAML, g.InlineYAML)
		check("configMap config", w.Config.ConfigMap, g.Config.ConfigMap)
		check("fromImage", w.Config.FromImage, g.Config.FromImage)
		check("serverPath", w.ServerPath, g.ServerPath)
		check("renderCache", w.RenderCache, g.RenderCache)
	}
}
