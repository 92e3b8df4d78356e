package policysync

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/policy"
	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
)

func catalogWithRevision(t *testing.T, rev string) []byte {
	t.Helper()
	b, err := os.ReadFile("../testdata/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := strings.Replace(string(b), `revision: "2026-11-21.1"`, `revision: "`+rev+`"`, 1)
	if out == string(b) {
		t.Fatal("the test catalog's revision line moved")
	}
	return []byte(out)
}

// sample reads one sample of reg's exposition (0 when absent).
func sample(t *testing.T, reg *prometheus.Registry, key string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	got, err := servingtest.ParseMetrics(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	return got[key]
}

// waitFor polls cond for up to 10 s: the syncer runs in its own goroutine.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestSyncerKeepsPoliciesEqualToTheCatalog(t *testing.T) {
	file := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(file, catalogWithRevision(t, "r1"), 0o644); err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	reg := prometheus.NewRegistry()
	s, err := New(Options{Client: client, Policy: policy.Options{Name: "p"}, CatalogFile: file, Poll: 20 * time.Millisecond,
		Resync: time.Hour, Log: zap.NewNop(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if s.Ready() == nil {
		t.Error("ready before anything was applied")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	revision := func() string {
		m, err := client.AdmissionregistrationV1().MutatingAdmissionPolicies().Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			return ""
		}
		return m.Annotations[keys.PolicyRevisionAnnotation]
	}
	waitFor(t, "revision r1 applied", func() bool { return revision() == "r1" && s.Ready() == nil })
	if _, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, "p", metav1.GetOptions{}); err != nil {
		t.Errorf("the validating policy: %v", err)
	}
	if _, err := client.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Get(ctx, "p", metav1.GetOptions{}); err == nil {
		t.Error("a binding was applied with Bindings false")
	}

	// A catalog that does not load: kept, counted, not ready.
	if err := os.WriteFile(file, []byte("kind: PluginCatalog\nplugins: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the bad catalog reported", func() bool {
		return sample(t, reg, `cmp_injector_policy_errors_total{stage="catalog"}`) == 1 && s.Ready() != nil
	})
	if revision() != "r1" {
		t.Errorf("a bad catalog changed the policies: revision %q", revision())
	}

	// A good one again: applied.
	if err := os.WriteFile(file, catalogWithRevision(t, "r2"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "revision r2 applied", func() bool { return revision() == "r2" && s.Ready() == nil })
	if got := sample(t, reg, `cmp_injector_policy_catalog_revision{revision="r2"}`); got != 1 {
		t.Errorf("cmp_injector_policy_catalog_revision{revision=r2} = %v", got)
	}
	if got := sample(t, reg, "cmp_injector_policy_applies_total"); got != 2 {
		t.Errorf("applies = %v, want 2", got)
	}
}

// A newer valid catalog is not ready until its policies are applied: the
// metrics, Catalog and OnApplied all follow the apply, and readiness must not
// run ahead of them.
func TestReadyWaitsForTheLoadedCatalogsApply(t *testing.T) {
	s, err := New(Options{Client: fake.NewClientset(), Policy: policy.Options{Name: "p"}, CatalogFile: "unused",
		Poll: time.Second, Resync: time.Hour, Log: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	r1, err := catalog.Parse(catalogWithRevision(t, "r1"))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := catalog.Parse(catalogWithRevision(t, "r2"))
	if err != nil {
		t.Fatal(err)
	}
	s.loadedCatalog(r1)
	if err := s.Apply(context.Background(), r1); err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(); err != nil {
		t.Fatalf("r1 applied: %v", err)
	}
	s.loadedCatalog(r2)
	if err := s.Ready(); err == nil || !strings.Contains(err.Error(), `"r2"`) {
		t.Fatalf("r2 loaded, not applied: Ready = %v", err)
	}
	if err := s.Apply(context.Background(), r2); err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(); err != nil {
		t.Fatalf("r2 applied: %v", err)
	}
}
