package adopt

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
)

// libraryEntry is a plugin of the library (deploy/plugins, the example
// catalog) that adopt recognises in a hand-written sidecar by the program its
// plugin.yaml runs.
type libraryEntry struct {
	program string // the tool a command runs, by base name
	entry   string // the example catalog's plugin name
	// settings is what the entry reads from the admin's ConfigMap (none when
	// settingsMap is empty), and how a hand-written sidecar's env spells the
	// same.
	settingsMap  string
	settingsKeys []string
	serves       string
	// differs is what the hand-written plugin does otherwise than the entry.
	differs func(e libraryEntry, h handWritten) []string
}

// handWritten is what recogniseLibrary read of a hand-written plugin.
type handWritten struct {
	pl    *pluginconfig.Plugin
	words []string        // every word of its commands, by base name
	shell bool            // a command runs a shell
	env   []corev1.EnvVar // its container's env; nil: unknown
}

// library are the entries adopt recognises: the set-ups these projects
// document (argocd-vault-plugin's cmp sidecars, one per kind of app; the
// cdk8s sidecars of akuity/cdk8s-cmp, which install the app's npm packages
// at every render).
var library = []libraryEntry{{
	program:      "argocd-vault-plugin",
	entry:        "argocd-vault-plugin",
	settingsMap:  "avp-settings",
	settingsKeys: []string{"VAULT_ADDR", "AVP_K8S_ROLE"},
	serves:       "plain manifests, Helm charts and kustomizations in one sidecar",
	differs:      avpDiffers,
}, {
	program: "cdk8s",
	entry:   "cdk8s",
	serves:  "cdk8s apps in JavaScript and TypeScript with Node.js, cdk8s-cli, cdk8s, cdk8s-plus-33, constructs and ts-node in its image",
	differs: cdk8sDiffers,
}}

func avpDiffers(e libraryEntry, h handWritten) []string {
	var diffs []string
	if h.shell {
		diffs = append(diffs, "its commands run a shell, the entry's an argv (cmp-server avp: the render piped into "+e.program+" without one)")
	}
	if h.pl.DiscoveryConfigured() {
		diffs = append(diffs, "it has a discovery rule, the entry none: Applications name the plugin ("+e.entry+")")
	}
	if set := envSettings(h.env, e.settingsKeys); len(set) > 0 {
		diffs = append(diffs, fmt.Sprintf("its env sets %s, which the entry reads from the ConfigMap %s", strings.Join(set, ", "), e.settingsMap))
	}
	if h.env != nil && !hasEnv(h.env, "AVP_K8S_TOKEN_PATH") {
		diffs = append(diffs, "it reads the default service-account token, the entry a projected one of audience vault (the Vault role must demand audience=vault)")
	}
	return diffs
}

// cdk8sDiffers: the entry's image holds the packages an app requires and
// installs none; it discovers cdk8s.yaml, which cdk8s init writes.
func cdk8sDiffers(e libraryEntry, h handWritten) []string {
	var diffs []string
	for _, pm := range []string{"npm", "yarn", "pnpm"} {
		if slices.Contains(h.words, pm) {
			diffs = append(diffs, "its commands run "+pm+", which installs the app's packages from the registry at every render; the entry installs nothing: an app requires the image's packages (or commits node_modules)")
			break
		}
	}
	if d := h.pl.Spec.Discover; d == nil || !h.pl.DiscoveryConfigured() {
		diffs = append(diffs, "it has no discovery rule, the entry discovers cdk8s.yaml")
	} else if d.FileName != "cdk8s.yaml" {
		diffs = append(diffs, "its discovery rule differs: the entry discovers cdk8s.yaml")
	}
	return diffs
}

// recogniseLibrary adds a note when pl, adopted as plugin name from object,
// runs a library plugin's tool: the library's entry serves it from a built
// image, and what differs from the hand-written one, whose container had env
// (nil: unknown).
func (a *adopter) recogniseLibrary(object, name string, env []corev1.EnvVar, pl *pluginconfig.Plugin) {
	if pl == nil {
		return
	}
	cmds := []pluginconfig.Command{pl.Spec.Generate}
	if pl.Spec.Init != nil {
		cmds = append(cmds, *pl.Spec.Init)
	}
	h := handWritten{pl: pl, env: env}
	for _, c := range cmds {
		argv := append(append([]string{}, c.Command...), c.Args...)
		if len(argv) > 0 && isShell(argv[0]) {
			h.shell = true
		}
		for _, w := range argv {
			for _, f := range strings.Fields(w) {
				h.words = append(h.words, path.Base(f))
			}
		}
	}
	for _, e := range library {
		if !slices.Contains(h.words, e.program) {
			continue
		}
		diffs := e.differs(e, h)
		msg := fmt.Sprintf("this plugin runs %s: the plugin library's entry %s serves %s, from a built image with no download at start", e.program, e.entry, e.serves)
		if len(diffs) > 0 {
			msg += "; what differs: " + strings.Join(diffs, "; ")
		}
		settings := ""
		if e.settingsMap != "" {
			settings = fmt.Sprintf("create the ConfigMap %s with %s, ", e.settingsMap, strings.Join(e.settingsKeys, " and "))
		}
		action := fmt.Sprintf("to use it instead: enable %s in the catalog's namespaces (the example catalog, or the chart's catalog.examples), %spoint the Applications at plugin %s, then remove plugins.%s (deploy/plugins/%s/README.md)",
			e.entry, settings, e.entry, name, e.entry)
		if name == e.entry {
			action = fmt.Sprintf("to use it instead: replace plugins.%s with the example catalog's entry of that name (the Applications keep naming it)", name)
			if settings != "" {
				action += ", " + strings.TrimSuffix(settings, ", ")
			}
			action += fmt.Sprintf(" (deploy/plugins/%s/README.md)", e.entry)
		}
		a.f.add(Info, CodeLibraryEntry, object, name, msg, action)
	}
}

func isShell(p string) bool {
	switch path.Base(p) {
	case "sh", "bash", "ash", "dash", "zsh":
		return true
	}
	return false
}

// envSettings are the names among keys that env sets.
func envSettings(env []corev1.EnvVar, keys []string) []string {
	var set []string
	for _, k := range keys {
		if hasEnv(env, k) {
			set = append(set, k)
		}
	}
	return set
}

func hasEnv(env []corev1.EnvVar, name string) bool {
	for _, e := range env {
		if e.Name == name {
			return true
		}
	}
	return false
}
