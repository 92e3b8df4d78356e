package adopt

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// adopter is one run of Adopt.
type adopter struct {
	opts    Options
	objects []*object
	f       findings
	plugins map[string]*catalog.Plugin
	// adopted lists the plugins in the order they were found.
	adopted []Adopted
	// namespaces is the catalog's namespaces map.
	namespaces map[string][]string
	defaults   catalog.Defaults
	removed    []Removal
	// usedKeys are ConfigMap keys now inline in the catalog, per ConfigMap.
	usedKeys map[*object]map[string]bool
}

// Adopt reads manifests and returns the catalog, the workload and the
// findings. An error means the input could not be read at all; everything
// else, even nothing to adopt, is a finding.
func Adopt(input []byte, opts Options) (*Result, error) {
	objs, err := readObjects(input)
	if err != nil {
		return nil, err
	}
	a := &adopter{
		opts: opts, objects: objs, plugins: map[string]*catalog.Plugin{},
		namespaces: map[string][]string{}, usedKeys: map[*object]map[string]bool{},
	}
	a.defaults.CopyImage = opts.CopyImage
	var hosts []*host
	for _, o := range objs {
		h, err := hostOf(o)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.id(), err)
		}
		if h != nil {
			hosts = append(hosts, h)
		}
	}
	for _, h := range hosts {
		a.adoptHost(h)
	}
	a.adoptLegacy(hosts)
	a.unusedConfigMaps()
	if len(a.adopted) == 0 {
		a.f.add(Essential, CodeNothingToAdopt, "", "",
			"the input holds no CMP sidecar (a container running argocd-cmp-server or mounting "+keys.PluginSocketDir+") and no argocd-cm configManagementPlugins",
			"give adopt the repo-server workload with its sidecars (kubectl get deployment argocd-repo-server -o yaml), the ArgoCD resource, or argocd-cm")
	}
	return a.result()
}

// pluginCtx is the sidecar being adopted.
type pluginCtx struct {
	h *host
	c *corev1.Container
	// native: the sidecar is an init container with restartPolicy Always.
	native bool
	// ours is the plugin name when the injector added this sidecar.
	ours string
	name string
	ns   string
	p    *catalog.Plugin
}

func (pc *pluginCtx) id() string { return pc.h.obj.id() }

// namespaceOf is the namespace the catalog enables an object's plugins in.
func (a *adopter) namespaceOf(o *object) string {
	return first(a.opts.Namespace, o.namespace, defaultNamespace)
}

// configMap finds a ConfigMap of the input by name, in namespace ns or
// without one.
func (a *adopter) configMap(ns, name string) *object {
	var loose *object
	for _, o := range a.objects {
		if !isConfigMap(o) || o.name != name {
			continue
		}
		if o.namespace == ns {
			return o
		}
		if o.namespace == "" || loose == nil {
			loose = o
		}
	}
	return loose
}

func (a *adopter) useKey(cm *object, key string) {
	if a.usedKeys[cm] == nil {
		a.usedKeys[cm] = map[string]bool{}
	}
	a.usedKeys[cm][key] = true
}

// unusedConfigMaps names the ConfigMaps whose every key is now inline.
func (a *adopter) unusedConfigMaps() {
	for _, o := range a.objects {
		used := a.usedKeys[o]
		if used == nil {
			continue
		}
		data := stringData(o)
		if slices.ContainsFunc(slices.Collect(maps.Keys(data)), func(k string) bool { return !used[k] }) {
			continue
		}
		a.f.add(Info, CodeConfigMapUnused, o.id(), "",
			"every plugin.yaml it holds is now inline in the catalog",
			fmt.Sprintf("delete ConfigMap %s once the injected repo-server runs (argo-helm: configs.cmp.create: false)", o.name))
	}
}

// addPlugin records an adopted plugin under a free catalog name.
func (a *adopter) addPlugin(pc *pluginCtx, from string) {
	a.plugins[pc.name] = pc.p
	a.adopted = append(a.adopted, Adopted{Name: pc.name, Object: pc.id(), Container: from})
	a.namespaces[pc.ns] = append(a.namespaces[pc.ns], pc.name)
}

// catalogName derives a catalog name from a sidecar's: without the "cmp-"
// prefix the injector puts back, a DNS-1123 label short enough for its
// derived names, not yet taken.
func (a *adopter) catalogName(want string) string {
	base := strings.TrimPrefix(want, keys.SidecarPrefix)
	base = sanitizeLabel(base, keys.MaxPluginNameLen)
	if base == "" {
		base = "plugin"
	}
	name := base
	for i := 2; a.plugins[name] != nil; i++ {
		suffix := fmt.Sprintf("-%d", i)
		name = strings.TrimRight(truncate(base, keys.MaxPluginNameLen-len(suffix)), "-") + suffix
	}
	return name
}

// sanitizeLabel lowers s and replaces what a DNS-1123 label cannot hold,
// cut to n characters.
func sanitizeLabel(s string, n int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return strings.Trim(truncate(strings.Trim(b.String(), "-"), n), "-")
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
