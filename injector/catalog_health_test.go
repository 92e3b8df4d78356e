package injector

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCatalogHealthRecoversWithSameContent: the catalog file unreadable for a
// moment sets cmp_injector_catalog_last_reload_success to 0; the same file
// back sets it to 1 again without a reinstall (before, the poller and the
// watcher both skipped content they had seen, and the chart's alert fired
// until the catalog next changed).
func TestCatalogHealthRecoversWithSameContent(t *testing.T) {
	good, err := os.ReadFile("testdata/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(file, good, 0o644); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, file)
	health := func() float64 { return ts.samples(t).Sum("cmp_injector_catalog_last_reload_success") }
	if health() != 1 {
		t.Fatal("the catalog loaded at start is not healthy")
	}
	if err := os.Rename(file, file+".away"); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return health() == 0 })
	if err := os.Rename(file+".away", file); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return health() == 1 })
	m := ts.samples(t)
	wantSample(t, m, "cmp_injector_catalog_reloads_total", 1)
	wantSample(t, m, "cmp_injector_catalog_reload_errors_total", 1)
}
