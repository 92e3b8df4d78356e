package policy

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// variable is one named CEL expression of a policy; later ones read earlier
// ones as variables.<name>.
type variable struct{ name, expr string }

// Sentinels the parts are built with, replaced by expressions: a UID no
// catalog uses and an image no pod can name.
const (
	sentinelUID   = 1_987_654_321
	sentinelImage = "cmp-injector.invalid/sentinel-image"
)

// program is the CEL both policies share, for one catalog.
type program struct {
	cat *catalog.Catalog
	// deciding are the variables that find the repo-server and decide
	// whether the pod may be injected (problems); the validating policy
	// needs only these.
	deciding []variable
	// adding are the variables that build what is added.
	adding []variable
	// patch is the mutating policy's JSONPatch expression.
	patch string
}

// Message texts shared with pkg/inject's: the denial prefix and how a
// denial joins its problems.
const (
	denyPrefix  = "cmp-injector denied pod: "
	problemJoin = "; "
)

func newProgram(cat *catalog.Catalog) *program {
	p := &program{cat: cat}
	p.deciding = p.decide()
	p.adding = p.add()
	p.patch = p.patchExpr()
	return p
}

// repoServerMatch is true for a pod with a repo-server container, as
// inject.IsRepoServer decides: a container of the catalog's names, else one
// whose program (through entrypoint wrappers and sh -c) is one of its
// programs. The program is read from the words joined by spaces, so a word
// with spaces in it is read as sh -c's script is.
func (p *program) containerIsRepoServer(c string) string {
	d := p.cat.Defaults
	byName := c + ".name in " + strList(d.RepoServerNames)
	if len(d.RepoServerPrograms) == 0 {
		return byName
	}
	return "(" + byName + " || " + p.containerRunsRepoServer(c) + ")"
}

func (p *program) containerRunsRepoServer(c string) string {
	progs := make([]string, len(p.cat.Defaults.RepoServerPrograms))
	for i, prog := range p.cat.Defaults.RepoServerPrograms {
		progs[i] = regexp.QuoteMeta(prog)
	}
	// Wrappers and shells as pkg/inject's program() looks through them, at
	// most 8 deep; each word's directory is skipped as path.Base does.
	wrappers := `(?:tini|tini-static|dumb-init|entrypoint\.sh|uid_entrypoint\.sh|exec)(?:\s+-\S*)*\s+`
	shells := `(?:sh|bash|ash|dash)(?:\s+-\S*)*\s+`
	re := `^\s*(?:\S*/)?(?:(?:` + wrappers + `|` + shells + `)(?:\S*/)?){0,8}(?:` + strings.Join(progs, "|") + `)(?:\s|$)`
	return "(" + c + ".?command.orValue([]) + " + c + ".?args.orValue([])).join(\" \").matches(" + quote(re) + ")"
}

// matchRepoServer is the match condition both policies share.
func (p *program) matchRepoServer() string {
	return "object.spec.containers.exists(c, " + p.containerIsRepoServer("c") + ")"
}

// matchNotInjected: a pod that already has the status annotation is not
// injected again (the webhook checks what it owns; see docs/policy-mode.md).
const matchNotInjected = "!has(object.metadata.annotations) || !(" + `"` + keys.StatusAnnotation + `"` + " in object.metadata.annotations)"

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
	for _, ns := range sortedKeys(byNS) {
		nsMap = append(nsMap, quote(ns)+": "+strList(byNS[ns]))
	}
	annPrefix := fmt.Sprintf("annotation %s: ", pa)
	bounded := func(s string) string {
		return fmt.Sprintf(`(size(%[1]s) <= %[2]d ? strings.quote(%[1]s) : strings.quote(%[1]s.substring(0, %[2]d)) + "… (" + string(size(%[1]s) - %[2]d) + " more bytes)")`, s, maxQuoted)
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
		{"enabled", "(((request.namespace in {" + strings.Join(nsMap, ", ") + "}) ? {" + strings.Join(nsMap, ", ") + "}[request.namespace] : []) + " + strList(cat.Enabled(catalog.AllNamespaces)) + ").distinct()"},
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
		{"containerNames", "object.spec.?initContainers.orValue([]).map(c, c.name) + object.spec.containers.map(c, c.name)"},
		{"volumeNames", "object.spec.?volumes.orValue([]).map(v, v.name)"},
		{"collisionProblems", "(" + strList([]string{keys.CopyInitContainer, keys.SocketsContainer}) + " + variables.entries.map(p, " + quote(keys.SidecarPrefix) + " + p))" +
			`.filter(n, n in variables.containerNames).map(n, "container " + strings.quote(n) + " already exists and was not added by cmp-injector") + ` +
			"(" + strList([]string{keys.NoTokenVolume}) + " + (variables.gitCreds ? " + strList([]string{keys.AskPassVolume}) + " : []) + variables.entries.map(p, {" + strings.Join(pvNames, ", ") + "}[p]).flatten())" +
			`.filter(n, n in variables.volumeNames).map(n, "volume " + strings.quote(n) + " already exists and was not added by cmp-injector")`},
		{"askPassProblems", "variables.gitCreds && variables.rsc.?env.orValue([]).exists(e, e.name == " + quote(keys.EnvAskPassSock) + ") ? [" + quote(fmt.Sprintf(
			"the repo-server container sets %s itself, but plugins with gitCredentials reach the askpass socket at %s on volume %s, which cmp-injector adds: remove the variable from the repo-server",
			keys.EnvAskPassSock, keys.AskPassSocket, keys.AskPassVolume)) + "] : []"},
		{"shareProblems", "object.spec.?shareProcessNamespace.orValue(false) && size(variables.entries) > 0 ? [" + quote(
			"the pod sets shareProcessNamespace: true, which would let every plugin's commands read the other sidecars' env, secrets and files through /proc: remove it from the pod template") + "] : []"},
		{"problems", "!variables.listed ? variables.listProblems : variables.listProblems + variables.entryProblems + variables.pluginProblems + variables.annotationProblems + variables.collisionProblems + variables.askPassProblems + variables.shareProblems"},
	}
}

// maxQuoted is how much of a pod's value a message quotes (pkg/inject's
// quoteBounded).
const maxQuoted = 256

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// add writes the variables that decide what is added, in pkg/inject's build
// order, as names: the API server types only a mutation's own expression
// against the pod's schema, so the typed objects are built there (patchExpr)
// and looked up by these names. They are read only when there is no problem.
func (p *program) add() []variable {
	cat := p.cat
	native := cat.Defaults.NativeSidecars
	var serverPath, inline, pvNames, envNames []string
	for _, n := range cat.Names {
		e := cat.Plugins[n]
		if e.ServerPath != "" {
			serverPath = append(serverPath, n)
		}
		if e.InlineYAML != "" && e.Config.ConfigMap == nil {
			inline = append(inline, quote(n)+": "+quote(e.InlineYAML))
		}
		var vols []string
		for _, v := range inject.PluginVolumesPart(cat, e) {
			vols = append(vols, v.Name)
		}
		pvNames = append(pvNames, quote(n)+": "+strList(vols))
	}
	for _, e := range cat.Defaults.RepoServerEnv {
		envNames = append(envNames, e.Name)
	}
	missing := func(name string) string {
		return "(" + quote(name) + " in variables.volumeNames ? [] : " + strList([]string{name}) + ")"
	}
	hasMountAt := func(path string) string {
		return "variables.rsc.?volumeMounts.orValue([]).exists(m, m.mountPath == " + quote(path) + ")"
	}
	sidecars := "variables.entries.map(p, " + quote(keys.SidecarPrefix) + " + p) + " + strList([]string{keys.SocketsContainer})
	inits, mains := "(variables.copies ? "+strList([]string{keys.CopyInitContainer})+" : [])", "[]"
	if native {
		inits += " + " + sidecars
	} else {
		mains = sidecars
	}
	return []variable{
		{"copies", "variables.entries.exists(p, !(p in " + strList(serverPath) + "))"},
		{"uid", "variables.rsc.?securityContext.?runAsUser.orValue(0) > 0 ? variables.rsc.securityContext.runAsUser : object.spec.?securityContext.?runAsUser.orValue(0) > 0 ? object.spec.securityContext.runAsUser : " + strconv.FormatInt(cat.Defaults.RunAsUser, 10)},
		{"volumesAdded", "(variables.copies ? " + missing(keys.VarFilesVolume) + " : []) + " + missing(keys.PluginsVolume) + " + " + strList([]string{keys.NoTokenVolume}) + " + " +
			"variables.entries.map(p, {" + strings.Join(pvNames, ", ") + "}[p]).flatten() + (variables.gitCreds ? " + strList([]string{keys.AskPassVolume}) + " : [])"},
		{"rsMountsAdded", "(" + hasMountAt(keys.PluginSocketDir) + " ? [] : " + strList([]string{keys.PluginsVolume}) + ") + " +
			"(variables.gitCreds && !" + hasMountAt(keys.AskPassDir) + " ? " + strList([]string{keys.AskPassVolume}) + " : [])"},
		{"rsEnvAdded", "(size(variables.rsc.?envFrom.orValue([])) > 0 ? [] : " + strList(envNames) + ".filter(n, !variables.rsc.?env.orValue([]).exists(x, x.name == n))) + " +
			"(variables.gitCreds ? " + strList([]string{keys.EnvAskPassSock}) + " : [])"},
		{"routes", "variables.entries.map(p, " + p.routes() + "[p]).flatten()"},
		{"initsAdded", inits},
		{"mainsAdded", mains},
		{"configs", "variables.entries.filter(p, p in {" + strings.Join(inline, ", ") + "}).map(p, [p, {" + strings.Join(inline, ", ") + "}[p]])"},
		{"status", p.statusExpr()},
	}
}

// routes is the map of what each plugin adds to the sockets container's
// command.
func (p *program) routes() string {
	var routes []string
	for _, n := range p.cat.Names {
		words, _ := inject.SocketRoutePart(p.cat.Plugins[n])
		routes = append(routes, quote(n)+": "+strList(words))
	}
	return "{" + strings.Join(routes, ", ") + "}"
}

// statusExpr writes the status annotation's JSON as inject.Status marshals
// it: every name in it is a DNS label or an env name, so none needs escaping;
// the revision is the catalog's, marshalled here.
func (p *program) statusExpr() string {
	rev, _ := json.Marshal(p.cat.Revision)
	list := func(l string) string { return `"[" + ` + l + `.map(s, "\"" + s + "\"").join(",") + "]"` }
	return `"{\"plugins\":" + ` + list("variables.entries") +
		` + ",\"containers\":" + ` + list("variables.mainsAdded") +
		` + ",\"initContainers\":" + ` + list("variables.initsAdded") +
		` + ",\"volumes\":" + ` + list("variables.volumesAdded") +
		` + (size(variables.rsEnvAdded) > 0 ? ",\"repoServerEnv\":" + ` + list("variables.rsEnvAdded") + ` : "")` +
		` + ",\"revision\":" + ` + quote(string(rev)) + ` + "}"`
}

// patchExpr is the JSONPatch the mutating policy applies: pkg/inject's
// patch order (volumes, the repo-server's mounts and env, init containers,
// containers, annotations), each list created when the pod has none. Every
// object that may be added is written once, typed, in a map bound to a name
// (as the one element of a list that map() walks: the API server's CEL has
// no cel.bind), and the names decided above pick from it.
func (p *program) patchExpr() string {
	add := func(path, value string) string {
		return `JSONPatch{op: "add", path: ` + path + `, value: ` + value + `}`
	}
	appendAll := func(has, path, names, objects string) string {
		return "(size(" + names + ") > 0 && !" + has + " ? [" + add(path, "[]") + "] : []) + " +
			names + ".map(n, " + add(path+` + "/-"`, objects+"[n]") + ")"
	}
	rs := `"/spec/containers/" + string(variables.rs)`
	vols, mounts, env, inits, mains := p.objects()
	ops := []string{
		appendAll("has(object.spec.volumes)", `"/spec/volumes"`, "variables.volumesAdded", "vols"),
		appendAll("has(variables.rsc.volumeMounts)", rs+` + "/volumeMounts"`, "variables.rsMountsAdded", "mounts"),
		appendAll("has(variables.rsc.env)", rs+` + "/env"`, "variables.rsEnvAdded", "env"),
		appendAll("has(object.spec.initContainers)", `"/spec/initContainers"`, "variables.initsAdded", "inits"),
	}
	if mains != "{}" {
		ops = append(ops, "variables.mainsAdded.map(n, "+add(`"/spec/containers/-"`, "mains[n]")+")")
	}
	ops = append(ops,
		"variables.configs.map(kv, "+add(`"/metadata/annotations/" + jsonpatch.escapeKey(`+quote(keys.ConfigAnnotationPrefix)+` + kv[0])`, "kv[1]")+")",
		"["+add(`"/metadata/annotations/" + jsonpatch.escapeKey(`+quote(keys.StatusAnnotation)+`)`, "variables.status")+"]",
	)
	body := strings.Join(ops, " +\n")
	for _, b := range []struct{ name, value string }{{"mains", mains}, {"inits", inits}, {"env", env}, {"mounts", mounts}, {"vols", vols}} {
		if b.name == "mains" && mains == "{}" {
			continue
		}
		body = "[" + b.value + "].map(" + b.name + ",\n" + body + ")[0]"
	}
	return "size(variables.problems) > 0 ? [] :\n" + body
}

// objects writes, as typed map literals keyed by name, every volume, mount,
// env var and container the policy may add.
func (p *program) objects() (vols, mounts, env, inits, mains string) {
	cat := p.cat
	native := cat.Defaults.NativeSidecars
	ctrType := "Object.spec.containers"
	if native {
		ctrType = "Object.spec.initContainers"
	}
	volLit := func(v corev1.Volume) string { return (&literal{}).of(jsonOf(v), "Object.spec.volumes") }
	mountLit := func(m corev1.VolumeMount, typ string) string { return (&literal{}).of(jsonOf(m), typ+".volumeMounts") }
	uid := field{expr: "variables.uid > 0 ? optional.of(variables.uid) : optional.none()", optional: true}
	askVol, askMount, askEnv := inject.AskPassParts()

	var vs, sidecars, routeMounts []string
	for _, n := range []string{keys.VarFilesVolume, keys.PluginsVolume, keys.NoTokenVolume} {
		vs = append(vs, quote(n)+": "+volLit(inject.SharedVolumePart(n)))
	}
	vs = append(vs, quote(askVol.Name)+": "+volLit(askVol))
	for _, n := range cat.Names {
		e := cat.Plugins[n]
		for _, v := range inject.PluginVolumesPart(cat, e) {
			vs = append(vs, quote(v.Name)+": "+volLit(v))
		}
		image := "(" + quote(keys.ImageAnnotationPrefix+n) + " in variables.annotations ? variables.annotations[" + quote(keys.ImageAnnotationPrefix+n) + "] : " + quote(e.Image) + ")"
		l := &literal{cond: "variables.copies", strings: map[string]string{sentinelImage: image}, ints: map[int64]field{sentinelUID: uid}}
		copied := jsonOf(inject.SidecarPart(cat, e, sentinelImage, sentinelUID, true))
		own := jsonOf(inject.SidecarPart(cat, e, sentinelImage, sentinelUID, false))
		sidecars = append(sidecars, quote(keys.SidecarName(n))+": "+l.pair(copied, own, ctrType))
		_, ms := inject.SocketRoutePart(e)
		lits := make([]string, len(ms))
		for i, m := range ms {
			lits[i] = mountLit(m, ctrType)
		}
		routeMounts = append(routeMounts, quote(n)+": ["+strings.Join(lits, ", ")+"]")
	}
	// The sockets container for no plugin, with the plugins' routes and
	// mounts appended in the pod's order.
	sockets := inject.SocketsContainerPart(cat, sentinelUID)
	baseMounts := make([]string, len(sockets.VolumeMounts))
	for i, m := range sockets.VolumeMounts {
		baseMounts[i] = mountLit(m, ctrType)
	}
	sl := &literal{ints: map[int64]field{sentinelUID: uid}, fields: map[string]field{
		"command":      {expr: strList(sockets.Command) + " + variables.routes"},
		"volumeMounts": {expr: "[" + strings.Join(baseMounts, ", ") + "] + variables.entries.map(p, {" + strings.Join(routeMounts, ", ") + "}[p]).flatten()"},
	}}
	if native {
		sl.fields["lifecycle"] = field{expr: (&literal{fields: map[string]field{
			"postStart.exec.command": {expr: strList(sockets.Lifecycle.PostStart.Exec.Command) + " + variables.routes"},
		}}).of(jsonOf(sockets.Lifecycle), ctrType+".lifecycle")}
	}
	sidecars = append(sidecars, quote(keys.SocketsContainer)+": "+sl.of(jsonOf(sockets), ctrType))
	copyC := quote(keys.CopyInitContainer) + ": " + (&literal{ints: map[int64]field{sentinelUID: uid}}).of(jsonOf(inject.CopyContainerPart(cat, sentinelUID)), "Object.spec.initContainers")

	rsType := "Object.spec.containers"
	var es []string
	for _, e := range append(append([]corev1.EnvVar{}, cat.Defaults.RepoServerEnv...), askEnv) {
		es = append(es, quote(e.Name)+": "+(&literal{}).of(jsonOf(e), rsType+".env"))
	}
	mounts = "{" + quote(keys.PluginsVolume) + ": " + mountLit(corev1.VolumeMount{Name: keys.PluginsVolume, MountPath: keys.PluginSocketDir}, rsType) +
		", " + quote(askMount.Name) + ": " + mountLit(askMount, rsType) + "}"
	vols, env = "{"+strings.Join(vs, ", ")+"}", "{"+strings.Join(es, ", ")+"}"
	if native {
		return vols, mounts, env, "{" + copyC + ", " + strings.Join(sidecars, ", ") + "}", "{}"
	}
	return vols, mounts, env, "{" + copyC + "}", "{" + strings.Join(sidecars, ", ") + "}"
}
