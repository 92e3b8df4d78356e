package injector

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"sigs.k8s.io/yaml"
)

// installPathBlock is a README install-path marker naming its fixture, then
// the yaml block it vouches for.
var installPathBlock = regexp.MustCompile("(?s)<!-- install-path: ([a-z-]+) \\(([^)]+)\\) -->\\s*```yaml\\n(.*?)```")

// TestReadmeInstallPaths: every label and annotation an install-path block of
// the README sets is on the pod template of the fixture it names, which the
// golden and end-to-end tests drive; a block that drifts from what is tested
// fails here.
func TestReadmeInstallPaths(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := installPathBlock.FindAllSubmatch(readme, -1)
	want := map[string]bool{"argo-helm": true, "operator": true}
	for _, b := range blocks {
		name, fixture, block := string(b[1]), string(b[2]), b[3]
		delete(want, name)
		t.Run(name, func(t *testing.T) {
			var values map[string]any
			if err := yaml.Unmarshal(block, &values); err != nil {
				t.Fatalf("README block: %v", err)
			}
			labels, annotations := optInOf(name, values)
			if len(labels) == 0 || len(annotations) == 0 {
				t.Fatalf("README block sets labels %v, annotations %v", labels, annotations)
			}
			doc, err := os.ReadFile(filepath.Join("..", fixture))
			if err != nil {
				t.Fatal(err)
			}
			var obj struct {
				Spec struct {
					Template struct {
						Metadata struct {
							Labels      map[string]string `json:"labels"`
							Annotations map[string]string `json:"annotations"`
						} `json:"metadata"`
					} `json:"template"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				t.Fatal(err)
			}
			meta := obj.Spec.Template.Metadata
			for k, v := range labels {
				if meta.Labels[k] != v {
					t.Errorf("label %s=%v: the fixture's pod template has %q", k, v, meta.Labels[k])
				}
			}
			for k, v := range annotations {
				if meta.Annotations[k] != v {
					t.Errorf("annotation %s=%v: the fixture's pod template has %q", k, v, meta.Annotations[k])
				}
			}
		})
	}
	for name := range want {
		t.Errorf("README has no install-path block %q", name)
	}
}

// optInOf reads the pod labels and annotations an install path's block sets:
// argo-helm's repoServer.podLabels/podAnnotations, the operator's
// spec.repo.labels/annotations. A value that is not a string stays as
// decoded, so an unquoted true fails the comparison.
func optInOf(path string, values map[string]any) (labels, annotations map[string]any) {
	var parent map[string]any
	switch path {
	case "argo-helm":
		parent, _ = values["repoServer"].(map[string]any)
		labels, _ = parent["podLabels"].(map[string]any)
		annotations, _ = parent["podAnnotations"].(map[string]any)
	case "operator":
		spec, _ := values["spec"].(map[string]any)
		parent, _ = spec["repo"].(map[string]any)
		labels, _ = parent["labels"].(map[string]any)
		annotations, _ = parent["annotations"].(map[string]any)
	}
	return labels, annotations
}
