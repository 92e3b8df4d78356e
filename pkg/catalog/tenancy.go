package catalog

import (
	"encoding/json"
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/tenancy"
)

// A plugin's allowedProjects and allowedSourceRepos (pkg/tenancy) reach its
// sidecar inside the inline plugin.yaml, as spec.allowedProjects and
// spec.allowedSourceRepos: the plugin server needs no API access to know
// them, and a change of them in the catalog reaches running sidecars like
// any change of the inline config (the reconciler updates the pod's
// annotation, the kubelet the projected file, the server reloads it).

// validateTenancy checks the rules of plugin field and that they can reach
// its sidecar: only an inline config carries them.
func validateTenancy(p *problems, field string, pl *Plugin) {
	for _, pr := range pl.Rules.Validate() {
		p.addf(field+"."+pr.Field, "%s", pr.Message)
	}
	if !pl.Rules.IsSet() || (len(pl.Config.Inline) > 0 && string(pl.Config.Inline) != "null") {
		return
	}
	name := tenancy.FieldProjects
	if pl.AllowedProjects == nil {
		name = tenancy.FieldSourceRepos
	}
	p.addf(field+"."+name, "needs config.inline: the rules travel to the sidecar inside the plugin.yaml the injector writes; "+
		"for a configMap or fromImage config, write spec.%s in that plugin.yaml instead", name)
}

// withTenancy adds e's rules to its parsed inline config and to the YAML the
// sidecar reads. The inline config must not set them itself: the catalog
// entry is their one place, which explain and doctor show.
func withTenancy(e *Entry, y []byte) ([]byte, error) {
	if set := e.Parsed.Spec.Rules; set.IsSet() {
		name := tenancy.FieldProjects
		if set.AllowedProjects == nil {
			name = tenancy.FieldSourceRepos
		}
		return nil, fmt.Errorf("sets spec.%s: write it on the catalog entry (plugins.%s.%s), not inside the inline config", name, e.Name, name)
	}
	if !e.Rules.IsSet() {
		return y, nil
	}
	var doc map[string]any
	if err := json.Unmarshal(e.Config.Inline, &doc); err != nil {
		return nil, err
	}
	spec, _ := doc["spec"].(map[string]any)
	if spec == nil {
		spec = map[string]any{}
		doc["spec"] = spec
	}
	if e.AllowedProjects != nil {
		spec[tenancy.FieldProjects] = e.AllowedProjects
	}
	if e.AllowedSourceRepos != nil {
		spec[tenancy.FieldSourceRepos] = e.AllowedSourceRepos
	}
	js, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	e.Parsed.Spec.Rules = e.Rules
	return yaml.JSONToYAML(js)
}
