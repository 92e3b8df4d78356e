package catalog

import (
	"errors"

	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
)

// parsePluginConfig and socketName are the only places the catalog touches the
// plugin.yaml format, so that the plugin server's parser is the single judge.
func parsePluginConfig(y []byte) (*pluginconfig.Plugin, error) {
	var pl pluginconfig.Plugin
	if err := yaml.UnmarshalStrict(y, &pl); err != nil {
		return nil, err
	}
	if pl.Kind != pluginconfig.Kind {
		return nil, errors.New("kind must be " + pluginconfig.Kind)
	}
	if pl.Metadata.Name == "" {
		return nil, errors.New("metadata.name: required")
	}
	return &pl, nil
}

func socketName(pl *pluginconfig.Plugin) string {
	if pl.Spec.Version != "" {
		return pl.Metadata.Name + "-" + pl.Spec.Version + ".sock"
	}
	return pl.Metadata.Name + ".sock"
}
