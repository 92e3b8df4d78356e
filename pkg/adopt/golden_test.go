package adopt

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/test/golden"
)

// Each directory of testdata/golden is a case: input.yaml (or, for a round
// trip, source-workload.yaml and source-catalog.yaml, which the test injects
// with pkg/inject as `cmp-injector inject` does to make the input), an
// optional options.yaml, and what adopt must write: catalog.yaml,
// workload.yaml and report.txt (the report, then the exit code). A missing
// or stale expected file fails; -update rewrites them. Nothing else may be
// in a case.
const goldenDir = "testdata/golden"

var (
	inputFiles    = []string{"input.yaml", "source-workload.yaml", "source-catalog.yaml", "options.yaml"}
	expectedFiles = []string{"catalog.yaml", "workload.yaml", "report.txt"}
)

// goldenOptions are the options every case runs with unless its
// options.yaml says otherwise.
var goldenOptions = Options{CopyImage: "ghcr.io/cmp-injector/cmp-server:v0.1.0"}

func TestGolden(t *testing.T) {
	dirs, err := os.ReadDir(goldenDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		t.Run(d.Name(), func(t *testing.T) {
			dir := filepath.Join(goldenDir, d.Name())
			checkCaseFiles(t, dir)
			input := caseInput(t, dir)
			opts := goldenOptions
			if b, err := os.ReadFile(filepath.Join(dir, "options.yaml")); err == nil {
				if err := yaml.UnmarshalStrict(b, &opts); err != nil {
					t.Fatal(err)
				}
			}
			r, err := Adopt(input, opts)
			if err != nil {
				t.Fatal(err)
			}
			var report bytes.Buffer
			if err := r.WriteReport(&report); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&report, "exit: %d\n", exitCode(r))
			got := map[string][]byte{"catalog.yaml": r.Catalog, "workload.yaml": r.Workload, "report.txt": report.Bytes()}
			for _, name := range expectedFiles {
				// adopt writes no catalog or workload when it adopts
				// nothing: then the case has no such file.
				golden.CheckOptional(t, filepath.Join(dir, name), got[name])
			}
			if len(r.Catalog) > 0 {
				// The written catalog must load through the real loader.
				if _, err := catalog.Load(filepath.Join(dir, "catalog.yaml")); err != nil && !slices.ContainsFunc(r.Findings, func(f Finding) bool { return f.Code == CodeCatalogInvalid }) {
					t.Errorf("catalog.yaml does not load: %v", err)
				}
			}
		})
	}
}

func exitCode(r *Result) int {
	if r.Lost() {
		return 1
	}
	return 0
}

func checkCaseFiles(t *testing.T, dir string) {
	t.Helper()
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !slices.Contains(inputFiles, f.Name()) && !slices.Contains(expectedFiles, f.Name()) {
			t.Errorf("%s: unexpected file %s", dir, f.Name())
		}
	}
}

// caseInput is input.yaml, or the round trip's workload injected with its
// catalog.
func caseInput(t *testing.T, dir string) []byte {
	t.Helper()
	if b, err := os.ReadFile(filepath.Join(dir, "input.yaml")); err == nil {
		return b
	}
	return injected(t, filepath.Join(dir, "source-workload.yaml"), filepath.Join(dir, "source-catalog.yaml"))
}

// injected runs the offline injector on a workload, as `cmp-injector
// inject` does, and returns the injected YAML stream.
func injected(t *testing.T, workload, catalogFile string) []byte {
	t.Helper()
	cat, err := catalog.Load(catalogFile)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(workload)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	objs, err := inject.IntoResources(f, cat, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := inject.Denials(objs); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for i, o := range objs {
		if i > 0 {
			out.WriteString("---\n")
		}
		out.Write(o.Output)
	}
	return out.Bytes()
}
