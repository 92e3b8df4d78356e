package adopt

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// Argo CD's argocd-cm plugins (removed in v2.8): a YAML list under one key,
// each with a name, optional init and generate commands and lockRepo. They
// ran inside the repo-server container; adopt makes each a sidecar plugin
// whose plugin.yaml has the same name (so Applications that name it keep
// working) and the same commands.

const (
	argocdCM          = "argocd-cm"
	legacyPluginsKey  = "configManagementPlugins"
	pluginAPIVersion  = "argoproj.io/v1alpha1"
	pluginKind        = "ConfigManagementPlugin"
	legacyPluginsNote = "argocd-cm plugin "
)

type legacyCommand struct {
	Command []string `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
}

type legacyPlugin struct {
	Name     string         `json:"name"`
	Init     *legacyCommand `json:"init,omitempty"`
	Generate *legacyCommand `json:"generate,omitempty"`
	LockRepo bool           `json:"lockRepo,omitempty"`
}

// adoptLegacy converts every argocd-cm plugin of the input.
func (a *adopter) adoptLegacy(hosts []*host) {
	for _, o := range a.objects {
		if !isConfigMap(o) || o.name != argocdCM {
			continue
		}
		text, ok := stringData(o)[legacyPluginsKey]
		if !ok {
			continue
		}
		var list []legacyPlugin
		if err := yaml.UnmarshalStrict([]byte(text), &list); err != nil {
			a.f.add(Essential, CodeConfigInvalid, o.id(), "",
				legacyPluginsKey+" does not parse as Argo CD's plugin list: "+err.Error(),
				"fix it and run adopt again")
			continue
		}
		rs := a.repoServerFor(o, hosts)
		var names []string
		for _, lp := range list {
			if name, ok := a.adoptLegacyPlugin(o, rs, lp); ok {
				names = append(names, name)
			}
		}
		if len(names) == 0 {
			continue
		}
		if len(names) == len(list) {
			delete(child(o.doc, true, "data"), legacyPluginsKey)
			o.changed = true
			a.removed = append(a.removed, Removal{Object: o.id(), Keys: []string{"data." + legacyPluginsKey}})
		}
		if rs != nil {
			rm := Removal{Object: rs.obj.id()}
			a.optIn(rs, names, &rm)
			rs.obj.changed = true
			if !slices.ContainsFunc(a.removed, func(r Removal) bool { return r.Object == rm.Object }) {
				a.hostNotes(rs)
			}
			continue
		}
		a.f.add(Info, CodeNamespaceLabel, o.id(), "",
			"the input holds no repo-server workload to opt in",
			fmt.Sprintf("label the repo-server's pod template %s=%s, annotate it %s: %q, and label namespace %s %s=%s",
				keys.InjectLabel, keys.EnabledValue, keys.PluginsAnnotation, strings.Join(names, ", "), a.namespaceOf(o), keys.NamespaceEnabledLabel, keys.EnabledValue))
	}
}

// repoServerFor is the repo-server workload in argocd-cm's namespace (the
// first one when the input names none), or nil.
func (a *adopter) repoServerFor(cm *object, hosts []*host) *host {
	var loose *host
	for _, h := range hosts {
		if h.operator() || h.repoServer < 0 {
			continue
		}
		if h.obj.namespace == cm.namespace {
			return h
		}
		if loose == nil {
			loose = h
		}
	}
	return loose
}

func (a *adopter) adoptLegacyPlugin(cm *object, rs *host, lp legacyPlugin) (string, bool) {
	id := cm.id()
	name := a.catalogName(lp.Name)
	if lp.Generate == nil || len(lp.Generate.Command) == 0 {
		a.f.add(Essential, CodeConfigInvalid, id, name, legacyPluginsNote+lp.Name+" has no generate command", "give it one and run adopt again")
		return "", false
	}
	image := a.opts.ArgoCDImage
	var rsc *corev1.Container
	if rs != nil {
		rsc = &rs.spec.Containers[rs.repoServer]
		image = first(image, rsc.Image)
	}
	if image == "" {
		a.f.add(Essential, CodeImageUnknown, id, name,
			legacyPluginsNote+lp.Name+" ran inside the repo-server container, whose image the input does not show; it was not adopted",
			"run adopt with the repo-server Deployment in the input, or with --argocd-image set to its image (or to one with the plugin's tools)")
		return "", false
	}
	spec := map[string]any{"generate": lp.Generate}
	if lp.Init != nil {
		spec["init"] = lp.Init
	}
	if lp.LockRepo {
		spec["allowConcurrency"] = false
	}
	doc := map[string]any{"apiVersion": pluginAPIVersion, "kind": pluginKind, "metadata": map[string]any{"name": lp.Name}, "spec": spec}
	raw, pl, problems := judgedInline(roundTrip(doc))
	if len(problems) > 0 {
		a.f.add(Essential, CodeConfigInvalid, id, name,
			legacyPluginsNote+lp.Name+" does not make a valid sidecar plugin.yaml: "+strings.Join(problems, "; "), "fix the plugin and run adopt again")
		return "", false
	}
	p := &catalog.Plugin{Image: image, Config: catalog.ConfigSource{Inline: raw}}
	if rsc != nil {
		for _, e := range rsc.EnvFrom {
			p.EnvFrom = append(p.EnvFrom, *e.DeepCopy())
		}
	}
	pc := &pluginCtx{p: p, name: name, ns: a.namespaceOf(cm)}
	// The plugin ran in the repo-server container, with its env.
	var env []corev1.EnvVar
	if rsc != nil {
		env = append([]corev1.EnvVar{}, rsc.Env...)
	}
	a.recogniseLibrary(id, name, env, pl)
	a.plugins[name] = p
	a.adopted = append(a.adopted, Adopted{Name: name, Object: id, Container: lp.Name})
	a.namespaces[pc.ns] = append(a.namespaces[pc.ns], name)
	msg := legacyPluginsNote + lp.Name + " ran inside the repo-server container; it becomes a sidecar plugin of the same name (Applications naming it keep working) from image " + image +
		", with no discovery rule (as before, only Applications that name it use it)"
	if len(p.EnvFrom) > 0 {
		msg += "; the repo-server's envFrom is copied, its env is not"
	}
	a.f.add(Warning, CodeLegacyPlugin, id, name, msg,
		"check that the image has every program the commands run ("+strings.Join(programs(lp), ", ")+") and set in plugins."+name+".env what they read from the repo-server's environment")
	if lp.LockRepo {
		a.f.add(Info, CodeLockRepoDropped, id, name, "lockRepo: true became spec.allowConcurrency: false (cmp-server serialises the plugin's commands)", "")
	}
	if vars := bareEnv(lp); len(vars) > 0 {
		a.f.add(Warning, CodeLegacyEnvPrefix, id, name,
			"the commands read "+strings.Join(vars, ", ")+": a sidecar plugin gets an Application's plugin env as ARGOCD_ENV_<name>, not by its bare name",
			"rename them in the plugin.yaml (e.g. $"+vars[0]+" to $"+keys.EnvPluginEnvPrefix+vars[0]+") where they come from the Application's spec.source.plugin.env")
	}
	if rs != nil {
		a.legacyTools(rs, rsc, lp, id, name)
	}
	return name, true
}

// roundTrip turns typed values into generic ones for judgedInline.
func roundTrip(doc map[string]any) map[string]any {
	b, _ := json.Marshal(doc)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

// legacyTools: a program the legacy plugin ran from a volume an init
// container filled in the repo-server (argocd-vault-plugin's custom-tools)
// is not in the sidecar's image.
func (a *adopter) legacyTools(rs *host, rsc *corev1.Container, lp legacyPlugin, id, name string) {
	for _, m := range rsc.VolumeMounts {
		f := rs.filler(m.Name)
		if f == nil || !slices.Contains(programs(lp), path.Base(m.MountPath)) {
			continue
		}
		a.f.add(Essential, CodeToolsFromInitContainer, id, name,
			fmt.Sprintf("%s%s runs %s, which init container %s put into the repo-server at %s; the sidecar's image %s does not have it", legacyPluginsNote, lp.Name, path.Base(m.MountPath), f.Name, m.MountPath, a.plugins[name].Image),
			fmt.Sprintf("build an image FROM %s with %s at %s and set it as plugins.%s.image", a.plugins[name].Image, path.Base(m.MountPath), m.MountPath, name))
	}
}

// programs are the base names of what the plugin's commands run.
func programs(lp legacyPlugin) []string {
	var out []string
	for _, c := range []*legacyCommand{lp.Init, lp.Generate} {
		if c == nil || len(c.Command) == 0 {
			continue
		}
		if p := path.Base(c.Command[0]); !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// envRef finds $NAME and ${NAME} in shell words.
var envRef = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)`)

// buildEnvPrefixes are what the repo-server sends every plugin by name
// (ARGOCD_APP_*, ARGOCD_ENV_*, KUBE_*) and what a shell sets itself.
var (
	buildEnvPrefixes = []string{"ARGOCD_", "KUBE_"}
	shellEnv         = []string{"HOME", "PATH", "PWD", "USER", "SHELL", "TMPDIR", "HOSTNAME"}
)

// bareEnv names variables the legacy commands read that are neither the
// build env nor the shell's: in argocd-cm plugins an Application's plugin
// env arrived by its bare name.
func bareEnv(lp legacyPlugin) []string {
	var out []string
	for _, c := range []*legacyCommand{lp.Init, lp.Generate} {
		if c == nil {
			continue
		}
		for _, w := range append(append([]string{}, c.Command...), c.Args...) {
			for _, m := range envRef.FindAllStringSubmatch(w, -1) {
				v := m[1]
				if slices.Contains(shellEnv, v) || slices.ContainsFunc(buildEnvPrefixes, func(p string) bool { return strings.HasPrefix(v, p) }) || slices.Contains(out, v) {
					continue
				}
				out = append(out, v)
			}
		}
	}
	return out
}
