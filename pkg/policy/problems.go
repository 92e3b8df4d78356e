package policy

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// decide writes the variables that find the repo-server, read the plugins
// annotation and list every problem, in the webhook's order and words.
func (p *program) decide() []variable {
	cat := p.cat
	pa := keys.PluginsAnnotation
	names := cat.Names
	byNS := map[string][]string{}
	for _, ns := range cat.Namespaces() {
		if ns != catalog.AllNamespaces {
			byNS[ns] = cat.Enabled(ns)
		}
	}
	var gitCreds, pvNames []string
	for _, n := range names {
		e := cat.Plugins[n]
		if e.GitCredentials {
			gitCreds = append(gitCreds, n)
		}
		var vols []string
		for _, v := range inject.PluginVolumesPart(cat, e) {
			vols = append(vols, v.Name)
		}
		pvNames = append(pvNames, quote(n)+": "+strList(vols))
	}
	allowed, allowedList := []string{}, []string{}
	for _, n := range names {
		e := cat.Plugins[n]
		var res []string
		for _, a := range e.AllowedImages {
			res = append(res, imageRegexp(a))
		}
		allowed = append(allowed, quote(n)+": "+strList(res))
		allowedList = append(allowedList, quote(n)+": "+quote(listOrNone(e.AllowedImages)))
	}
	nsMap := make([]string, 0, len(byNS))
	for _, ns := range slices.Sorted(maps.Keys(byNS)) {
		nsMap = append(nsMap, quote(ns)+": "+strList(byNS[ns]))
	}
	annPrefix := fmt.Sprintf("annotation %s: ", pa)
	bounded := func(s string) string {
		return fmt.Sprintf(`(size(%[1]s) <= %[2]d ? strings.quote(%[1]s) : strings.quote(%[1]s.substring(0, %[2]d)) + "… (" + string(size(%[1]s) - %[2]d) + " more bytes)")`, s, inject.MaxQuotedBytes)
	}
	entry := func(n string) string {
		return n + ` != "" && !` + n + `.matches("[ \t\n;|:]") && size(` + n + `) <= 63 && ` + n + `.matches("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")`
	}
	return []variable{
		{"annotations", "object.metadata.?annotations.orValue({})"},
		{"rsByName", "object.spec.containers.map(c, c.name in " + strList(cat.Defaults.RepoServerNames) + ").indexOf(true)"},
		{"rs", "variables.rsByName >= 0 ? variables.rsByName : object.spec.containers.map(c, " + p.containerIsRepoServer("c") + ").indexOf(true)"},
		{"rsc", "object.spec.containers[variables.rs]"},
		{"listed", quote(pa) + " in variables.annotations"},
		{"raw", "variables.listed ? variables.annotations[" + quote(pa) + "] : \"\""},
		{"parts", `variables.raw.split(",").map(s, s.trim())`},
		// The annotation as a whole, before its entries.
		{"listProblems", "!variables.listed ? [" + quote(fmt.Sprintf(
			"the pod has the label %s=%s but no annotation %s; list the plugins to inject, e.g. \"helm, kustomize\"",
			keys.InjectLabel, keys.EnabledValue, pa)) + "]" +
			` : variables.raw.trim() == "" ? [` + quote(annPrefix+`is empty; list catalog plugins separated by commas, e.g. "helm, kustomize"`) + "]" +
			fmt.Sprintf(` : size(bytes(variables.raw)) > %[1]d ? [%[2]s + string(size(bytes(variables.raw))) + %[3]s]`,
				keys.MaxPluginsAnnotationBytes, quote(annPrefix+"is "), quote(fmt.Sprintf(" bytes long; at most %d bytes (%d plugins) are accepted", keys.MaxPluginsAnnotationBytes, keys.MaxPluginsListed))) +
			fmt.Sprintf(` : size(variables.parts) > %[1]d ? [%[2]s + string(size(variables.parts)) + %[3]s]`,
				keys.MaxPluginsListed, quote(annPrefix+"lists "), quote(fmt.Sprintf(" entries; at most %d plugins are accepted", keys.MaxPluginsListed))) +
			" : []"},
		{"entryProblems", "size(variables.listProblems) > 0 ? [] : lists.range(size(variables.parts)).map(i, " +
			`variables.parts[i] == "" ? [` + quote(annPrefix+"entry ") + ` + string(i + 1) + " is empty"]` +
			` : variables.parts[i].matches("[ \t\n;|:]") ? [` + quote(annPrefix) + " + " + bounded("variables.parts[i]") + ` + " is not a plugin name; separate plugins with commas"]` +
			` : !(size(variables.parts[i]) <= 63 && variables.parts[i].matches("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")) ? [` + quote(annPrefix) + " + " + bounded("variables.parts[i]") + ` + " is not a valid plugin name (lower-case letters, digits and '-')"]` +
			` : variables.parts.slice(0, i).exists(x, x == variables.parts[i]) ? [` + quote(annPrefix+"plugin ") + ` + strings.quote(variables.parts[i]) + " is listed more than once"]` +
			" : []).flatten()"},
		{"plugins", "size(variables.listProblems) > 0 ? [] : variables.parts.filter(n, " + entry("n") + ").distinct()"},
		{"enabled", "({" + strings.Join(nsMap, ", ") + "}[?request.namespace].orValue([]) + " + strList(cat.Enabled(catalog.AllNamespaces)) + ").distinct()"},
		{"pluginProblems", "variables.plugins.map(p, !(p in " + strList(names) + `) ? ["plugin " + strings.quote(p) + ` + quote(" is not in the catalog (known: "+listOrNone(names)+")") + "]" +
			` : !(p in variables.enabled) ? ["plugin " + strings.quote(p) + " is not enabled in namespace " + strings.quote(request.namespace) + " (enabled: " + (size(variables.enabled) == 0 ? "none" : variables.enabled.join(", ")) + ")"] : []).flatten()`},
		{"entries", "variables.plugins.filter(p, p in " + strList(names) + " && p in variables.enabled)"},
		{"gitCreds", "variables.entries.exists(p, p in " + strList(gitCreds) + ")"},
		{"annotationProblems", "variables.annotations.filter(k, k.startsWith(" + quote(keys.ConfigAnnotationPrefix) + ") || k.startsWith(" + quote(keys.ImageAnnotationPrefix) + ")).sort().map(k, " +
			"k.startsWith(" + quote(keys.ConfigAnnotationPrefix) + `) ? ["annotation " + strings.quote(k) + " is written by cmp-injector from the catalog and must not be set on the pod"]` +
			" : !(k.substring(" + strconv.Itoa(len(keys.ImageAnnotationPrefix)) + `) in variables.plugins) ? ["annotation " + strings.quote(k) + " overrides the image of plugin " + strings.quote(k.substring(` + strconv.Itoa(len(keys.ImageAnnotationPrefix)) + `)) + ", which the pod does not request"]` +
			" : !(k.substring(" + strconv.Itoa(len(keys.ImageAnnotationPrefix)) + ") in " + strList(names) + ") ? []" +
			" : !variables.annotations[k].matches(" + quote(referencePattern) + `) ? ["image " + ` + bounded("variables.annotations[k]") + ` + " for plugin " + strings.quote(k.substring(` + strconv.Itoa(len(keys.ImageAnnotationPrefix)) + `)) + " is not a valid image reference"]` +
			" : !{" + strings.Join(allowed, ", ") + "}[k.substring(" + strconv.Itoa(len(keys.ImageAnnotationPrefix)) + ")].exists(r, variables.annotations[k].matches(r))" +
			` ? ["image " + ` + bounded("variables.annotations[k]") + ` + " for plugin " + strings.quote(k.substring(` + strconv.Itoa(len(keys.ImageAnnotationPrefix)) + `)) + " is not allowed (allowed: " + {` + strings.Join(allowedList, ", ") + "}[k.substring(" + strconv.Itoa(len(keys.ImageAnnotationPrefix)) + `)] + ")"] : []).flatten()`},
		// The volumes each plugin owns, by plugin: the collisions below
		// and the mutating policy's volumesAdded read it.
		{"pluginVolumes", "{" + strings.Join(pvNames, ", ") + "}"},
		{"containerNames", "object.spec.?initContainers.orValue([]).map(c, c.name) + object.spec.containers.map(c, c.name)"},
		{"volumeNames", "object.spec.?volumes.orValue([]).map(v, v.name)"},
		{"collisionProblems", "(" + strList([]string{keys.CopyInitContainer, keys.SocketsContainer}) + " + variables.entries.map(p, " + quote(keys.SidecarPrefix) + " + p))" +
			`.filter(n, n in variables.containerNames).map(n, "container " + strings.quote(n) + " already exists and was not added by cmp-injector") + ` +
			"(" + strList([]string{keys.NoTokenVolume}) + " + (variables.gitCreds ? " + strList([]string{keys.AskPassVolume}) + " : []) + variables.entries.map(p, variables.pluginVolumes[p]).flatten())" +
			`.filter(n, n in variables.volumeNames).map(n, "volume " + strings.quote(n) + " already exists and was not added by cmp-injector")`},
		{"askPassProblems", "variables.gitCreds && variables.rsc.?env.orValue([]).exists(e, e.name == " + quote(keys.EnvAskPassSock) + ") ? [" + quote(fmt.Sprintf(
			"the repo-server container sets %s itself, but plugins with gitCredentials reach the askpass socket at %s on volume %s, which cmp-injector adds: remove the variable from the repo-server",
			keys.EnvAskPassSock, keys.AskPassSocket, keys.AskPassVolume)) + "] : []"},
		{"shareProblems", "object.spec.?shareProcessNamespace.orValue(false) && size(variables.entries) > 0 ? [" + quote(
			"the pod sets shareProcessNamespace: true, which would let every plugin's commands read the other sidecars' env, secrets and files through /proc: remove it from the pod template") + "] : []"},
		{"problems", "!variables.listed ? variables.listProblems : variables.listProblems + variables.entryProblems + variables.pluginProblems + variables.annotationProblems + variables.collisionProblems + variables.askPassProblems + variables.shareProblems"},
	}
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
