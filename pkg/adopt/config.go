package adopt

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
)

// Where a sidecar's plugin.yaml comes from: a ConfigMap key mounted at the
// config path (argo-helm's argocd-cmp-cm, argocd-vault-plugin's cmp-plugin),
// the injector's own annotation (our injected output), or the image.

// configFilePath is where the plugin server reads plugin.yaml.
var configFilePath = keys.PluginConfigDir + "/" + keys.PluginConfigFile

// isConfigMount: a mount of plugin.yaml itself or of its directory.
func isConfigMount(m corev1.VolumeMount) bool {
	return m.MountPath == configFilePath || m.MountPath == keys.PluginConfigDir
}

// configFrom builds the catalog config of the sidecar from its config mount
// m; ok is false when it cannot (a finding says why).
func (a *adopter) configFrom(pc *pluginCtx, m corev1.VolumeMount) (catalog.ConfigSource, bool) {
	v := pc.h.volume(m.Name)
	if v == nil {
		a.f.add(Essential, CodeVolumeNotFound, pc.id(), pc.name,
			fmt.Sprintf("container %s mounts its plugin.yaml from volume %q, which the input does not define", pc.c.Name, m.Name),
			"add the volume to the input (with the ConfigMap it names) and run adopt again")
		return catalog.ConfigSource{}, false
	}
	switch {
	case v.ConfigMap != nil:
		return a.configFromConfigMap(pc, m, v.ConfigMap)
	case v.DownwardAPI != nil && pc.ours != "":
		text, ok := pc.h.annotations[keys.ConfigAnnotationPrefix+pc.ours]
		if !ok {
			break
		}
		raw, problems := a.inline(pc, text)
		if len(problems) > 0 {
			a.f.add(Essential, CodeConfigInvalid, pc.id(), pc.name,
				"the plugin.yaml in annotation "+keys.ConfigAnnotationPrefix+pc.ours+" is not valid: "+strings.Join(problems, "; "),
				"fix the plugin.yaml and write it as plugins."+pc.name+".config.inline")
			return catalog.ConfigSource{}, false
		}
		return catalog.ConfigSource{Inline: raw}, true
	}
	a.f.add(Essential, CodeConfigSourceUnsupported, pc.id(), pc.name,
		fmt.Sprintf("container %s reads plugin.yaml from volume %q, which is not a ConfigMap; the catalog takes plugin.yaml inline, from a ConfigMap or from the image", pc.c.Name, m.Name),
		"write the plugin.yaml as plugins."+pc.name+".config.inline")
	return catalog.ConfigSource{}, false
}

func (a *adopter) configFromConfigMap(pc *pluginCtx, m corev1.VolumeMount, src *corev1.ConfigMapVolumeSource) (catalog.ConfigSource, bool) {
	// The file the sidecar sees: the subPath of a file mount, plugin.yaml
	// in a directory mount; items map it back to a key.
	file := keys.PluginConfigFile
	if m.MountPath == configFilePath {
		file = m.SubPath
	}
	key := file
	if len(src.Items) > 0 {
		key = ""
		for _, it := range src.Items {
			if it.Path == file {
				key = it.Key
			}
		}
	}
	if key == "" || (m.MountPath == configFilePath && m.SubPath == "") {
		a.f.add(Essential, CodeConfigInvalid, pc.id(), pc.name,
			fmt.Sprintf("container %s mounts ConfigMap %s at %s without naming a key (subPath) that holds plugin.yaml", pc.c.Name, src.Name, m.MountPath),
			"name the key holding plugin.yaml in plugins."+pc.name+".config.configMap.key")
		return catalog.ConfigSource{}, false
	}
	ref := catalog.ConfigSource{ConfigMap: &catalog.ConfigMapRef{Name: src.Name, Key: key}}
	if key == keys.PluginConfigFile {
		ref.ConfigMap.Key = "" // the catalog's default
	}
	cm := a.configMap(pc.ns, src.Name)
	if cm == nil {
		a.f.add(Warning, CodeConfigMapNotInInput, pc.id(), pc.name,
			fmt.Sprintf("ConfigMap %s (key %s) is not in the input, so its plugin.yaml stays there: the catalog refers to it by name", src.Name, key),
			fmt.Sprintf("keep ConfigMap %s in every namespace that uses the plugin, or run adopt with it in the input to inline it", src.Name))
		return ref, true
	}
	text, ok := stringData(cm)[key]
	if !ok {
		a.f.add(Essential, CodeConfigInvalid, pc.id(), pc.name,
			fmt.Sprintf("ConfigMap %s has no key %s, which container %s mounts as plugin.yaml: the sidecar cannot have started", src.Name, key, pc.c.Name),
			"find the plugin.yaml this plugin should have and write it as plugins."+pc.name+".config.inline")
		return catalog.ConfigSource{}, false
	}
	raw, problems := a.inline(pc, text)
	if len(problems) > 0 {
		a.f.add(Warning, CodeConfigKeptInConfigMap, pc.id(), pc.name,
			fmt.Sprintf("the plugin.yaml in ConfigMap %s key %s has problems the catalog refuses inline (%s); the entry keeps reading it from the ConfigMap", src.Name, key, strings.Join(problems, "; ")),
			"fix the plugin.yaml, then move it into plugins."+pc.name+".config.inline")
		return ref, true
	}
	a.useKey(cm, key)
	return catalog.ConfigSource{Inline: raw}, true
}

// inline turns a plugin.yaml text into the catalog's inline form, judged as
// the catalog judges it (unknown keys and validation errors are problems).
// spec.lockRepo, which sidecar plugins ignore, is dropped with a finding.
func (a *adopter) inline(pc *pluginCtx, text string) (json.RawMessage, []string) {
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return nil, []string{err.Error()}
	}
	if doc == nil {
		return nil, []string{"empty plugin.yaml"}
	}
	if spec, ok := doc["spec"].(map[string]any); ok {
		if _, ok := spec["lockRepo"]; ok {
			delete(spec, "lockRepo")
			a.f.add(Info, CodeLockRepoDropped, pc.id(), pc.name,
				"spec.lockRepo was dropped: Argo CD ignores it for sidecar plugins and the catalog refuses unknown keys",
				"to serialise this plugin's commands, set spec.allowConcurrency: false")
		}
	}
	raw, pl, problems := judgedInline(doc)
	var env []corev1.EnvVar
	if pc.c != nil {
		env = pc.c.Env
		if env == nil {
			env = []corev1.EnvVar{} // known to set nothing
		}
	}
	a.recogniseLibrary(pc.id(), pc.name, env, pl)
	if n := pl.VersionNotice(); len(problems) == 0 && n != "" {
		// Argo CD 4.0 refuses spec.version (pluginconfig.VersionNotice).
		a.f.add(Warning, CodeSpecVersion, pc.id(), pc.name, n, "rename the plugin in plugins."+pc.name+".config.inline before upgrading to Argo CD 4.0")
	}
	return raw, problems
}

// judgedInline checks doc with the plugin server's parser, strictly, and
// returns it with the plugin as parsed (nil when it does not parse).
func judgedInline(doc map[string]any) (json.RawMessage, *pluginconfig.Plugin, []string) {
	y, err := yaml.Marshal(doc)
	if err != nil {
		return nil, nil, []string{err.Error()}
	}
	pl, warnings, err := pluginconfig.Parse(y)
	if err != nil {
		return nil, nil, []string{err.Error()}
	}
	problems := warnings
	if err := pl.Validate(); err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return nil, pl, problems
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, pl, []string{err.Error()}
	}
	return raw, pl, nil
}
