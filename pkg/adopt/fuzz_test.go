package adopt

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
)

// FuzzAdopt: any input gives an error, or a report that writes, a
// workload.yaml that parses, and a catalog.yaml that loads through the real
// loader unless a catalog_invalid finding says it does not. The seed corpus
// is testdata/fuzz/FuzzAdopt plus every golden input.
func FuzzAdopt(f *testing.F) {
	inputs, _ := filepath.Glob(filepath.Join(goldenDir, "*", "input.yaml"))
	for _, in := range inputs {
		b, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Adopt(data, goldenOptions)
		if err != nil {
			return
		}
		if err := r.WriteReport(io.Discard); err != nil {
			t.Fatal(err)
		}
		var docs any
		if err := yaml.Unmarshal(r.Workload, &docs); err != nil {
			t.Fatalf("workload.yaml does not parse: %v", err)
		}
		if len(r.Catalog) == 0 {
			if len(r.Plugins) > 0 {
				t.Fatal("plugins adopted but no catalog written")
			}
			return
		}
		if _, err := catalog.Parse(r.Catalog); err != nil && !slices.ContainsFunc(r.Findings, func(f Finding) bool { return f.Code == CodeCatalogInvalid }) {
			t.Fatalf("catalog.yaml does not load and no finding says so: %v\n%s", err, r.Catalog)
		}
	})
}
