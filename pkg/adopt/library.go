package adopt

import (
	"fmt"
	"path"
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
	// settings is what the entry reads from the admin's ConfigMap, and how a
	// hand-written sidecar's env spells the same.
	settingsMap  string
	settingsKeys []string
	serves       string
}

// library are the entries adopt recognises: the set-ups these projects
// document (argocd-vault-plugin's cmp sidecars, one per kind of app).
var library = []libraryEntry{{
	program:      "argocd-vault-plugin",
	entry:        "argocd-vault-plugin",
	settingsMap:  "avp-settings",
	settingsKeys: []string{"VAULT_ADDR", "AVP_K8S_ROLE"},
	serves:       "plain manifests, Helm charts and kustomizations in one sidecar",
}}

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
	for _, e := range library {
		shell := false
		uses := false
		for _, c := range cmds {
			argv := append(append([]string{}, c.Command...), c.Args...)
			if len(argv) > 0 && isShell(argv[0]) {
				shell = true
			}
			for _, w := range argv {
				for _, f := range strings.Fields(w) {
					if path.Base(f) == e.program {
						uses = true
					}
				}
			}
		}
		if !uses {
			continue
		}
		var diffs []string
		if shell {
			diffs = append(diffs, "its commands run a shell, the entry's an argv (cmp-server avp: the render piped into "+e.program+" without one)")
		}
		if pl.DiscoveryConfigured() {
			diffs = append(diffs, "it has a discovery rule, the entry none: Applications name the plugin ("+e.entry+")")
		}
		if set := envSettings(env, e.settingsKeys); len(set) > 0 {
			diffs = append(diffs, fmt.Sprintf("its env sets %s, which the entry reads from the ConfigMap %s", strings.Join(set, ", "), e.settingsMap))
		}
		if env != nil && !hasEnv(env, "AVP_K8S_TOKEN_PATH") {
			diffs = append(diffs, "it reads the default service-account token, the entry a projected one of audience vault (the Vault role must demand audience=vault)")
		}
		msg := fmt.Sprintf("this plugin runs %s: the plugin library's entry %s serves %s, from a built image with no download at start", e.program, e.entry, e.serves)
		if len(diffs) > 0 {
			msg += "; what differs: " + strings.Join(diffs, "; ")
		}
		settings := fmt.Sprintf("create the ConfigMap %s with %s", e.settingsMap, strings.Join(e.settingsKeys, " and "))
		action := fmt.Sprintf("to use it instead: enable %s in the catalog's namespaces (the example catalog, or the chart's catalog.examples), %s, point the Applications at plugin %s, then remove plugins.%s (deploy/plugins/%s/README.md)",
			e.entry, settings, e.entry, name, e.entry)
		if name == e.entry {
			action = fmt.Sprintf("to use it instead: replace plugins.%s with the example catalog's entry of that name (the Applications keep naming it), %s (deploy/plugins/%s/README.md)",
				name, settings, e.entry)
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
