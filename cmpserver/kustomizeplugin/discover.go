package kustomizeplugin

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// KustomizationFiles are the names kustomize reads a kustomization from, in
// the order it tries them.
var KustomizationFiles = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// helmChartsFile is the discovery of the kustomize-helm plugin: the name of
// dir's kustomization file when it has a top-level helmCharts key, "" when it
// has none or there is no kustomization. A kustomization that does not parse
// is no match: the plain kustomize plugin then takes the app, and kustomize's
// own parse error reaches the user.
func helmChartsFile(dir string) (string, error) {
	for _, name := range KustomizationFiles {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		var k map[string]any
		if yaml.Unmarshal(data, &k) != nil {
			return "", nil
		}
		if _, ok := k["helmCharts"]; ok {
			return name, nil
		}
		return "", nil
	}
	return "", nil
}
