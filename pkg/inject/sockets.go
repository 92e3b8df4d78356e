package inject

import (
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// socketClashWarnings names hand-written plugin sidecars of pod that likely
// create the socket one of the injected plugins creates. All sidecars share
// the plugins volume and a socket is <plugin name>[-<version>].sock, so two
// plugins of one name fight over one file: the one started last takes it,
// and the repo-server talks to whichever that is. A hand-written sidecar's
// plugin.yaml lives in a ConfigMap the webhook cannot read (a decision does
// no I/O), so the clash is inferred from the ConfigMap key its plugin.yaml
// comes from (argo-helm's configs.cmp writes each plugin under the key
// <name>.yaml) and can only be a warning: a denial on a guess would stop a
// repo-server that works.
func socketClashWarnings(pod *corev1.Pod, cat *catalog.Catalog, entries []*catalog.Entry) []string {
	// Most pods have no ConfigMap volume: nothing to read, nothing built
	// (this runs on every injected pod in the webhook).
	var volumes map[string]*corev1.ConfigMapVolumeSource
	for i := range pod.Spec.Volumes {
		if cm := pod.Spec.Volumes[i].ConfigMap; cm != nil {
			if volumes == nil {
				volumes = map[string]*corev1.ConfigMapVolumeSource{}
			}
			volumes[pod.Spec.Volumes[i].Name] = cm
		}
	}
	if len(entries) == 0 || volumes == nil {
		return nil
	}
	var out []string
	for _, list := range [2][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			out = append(out, mountClashes(&list[i], volumes, entries)...)
		}
	}
	return out
}

// mountClashes are the warnings for container c's mounts of plugin.yaml.
func mountClashes(c *corev1.Container, volumes map[string]*corev1.ConfigMapVolumeSource, entries []*catalog.Entry) []string {
	var out []string
	for _, m := range c.VolumeMounts {
		cm := volumes[m.Name]
		if cm == nil {
			continue
		}
		key := configKey(m, cm)
		if key == "" {
			continue
		}
		name := strings.TrimSuffix(strings.TrimSuffix(key, ".yaml"), ".yml")
		for _, e := range entries {
			if keys.SocketFile(name, "") != socketOf(e) {
				continue
			}
			out = append(out, fmt.Sprintf(
				"container %q reads plugin.yaml from ConfigMap %q key %q: if that plugin is named %q, it creates the socket %s that the injected sidecar %q of plugin %q creates too, and the last to start takes it; rename one of them",
				c.Name, cm.Name, key, name, socketOf(e), keys.SidecarName(e.Name), e.Name))
		}
	}
	return out
}

// configKey is the ConfigMap key a mount places at the plugin server's
// plugin.yaml, or "" when the mount does not.
func configKey(m corev1.VolumeMount, cm *corev1.ConfigMapVolumeSource) string {
	mp := path.Clean(m.MountPath)
	switch {
	case mp == keys.PluginConfigDir+"/"+keys.PluginConfigFile && m.SubPath != "":
		if len(cm.Items) == 0 {
			return m.SubPath
		}
		for _, it := range cm.Items {
			if it.Path == m.SubPath {
				return it.Key
			}
		}
	case mp == keys.PluginConfigDir:
		for _, it := range cm.Items {
			if path.Clean(it.Path) == keys.PluginConfigFile {
				return it.Key
			}
		}
	}
	return ""
}

// socketOf is the socket file an injected plugin's server creates: known for
// an inline config, else assumed from the catalog name (a configMap or
// image-baked plugin.yaml usually names the plugin as the catalog does).
func socketOf(e *catalog.Entry) string {
	if e.Socket != "" {
		return e.Socket
	}
	return keys.SocketFile(e.Name, "")
}
