package kustomizeplugin

import (
	"os"
	"path/filepath"
	"testing"
)

func TestHelmChartsFile(t *testing.T) {
	for _, tc := range []struct {
		files map[string]string
		want  string
	}{
		{map[string]string{"kustomization.yaml": "helmCharts:\n- name: x\n"}, "kustomization.yaml"},
		{map[string]string{"Kustomization": "helmCharts: []\n"}, "Kustomization"},
		// kustomize reads the first name it finds, and so does discovery.
		{map[string]string{"kustomization.yaml": "resources: []\n", "kustomization.yml": "helmCharts: []\n"}, ""},
		{map[string]string{"kustomization.yaml": "helmChartInflationGenerator: []\n"}, ""},
		{map[string]string{"kustomization.yaml": "a: [\n"}, ""},
		{map[string]string{}, ""},
	} {
		dir := t.TempDir()
		for name, content := range tc.files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := helmChartsFile(dir); err != nil || got != tc.want {
			t.Errorf("%v: %q %v, want %q", tc.files, got, err, tc.want)
		}
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "kustomization.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := helmChartsFile(dir); err == nil {
		t.Error("a directory named kustomization.yaml read without an error")
	}
}
