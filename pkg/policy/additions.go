package policy

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// add writes the variables that decide what is added, in pkg/inject's build
// order, as names: the API server types only a mutation's own expression
// against the pod's schema, so the typed objects are built there (patchExpr)
// and looked up by these names. They are read only when there is no problem.
func (p *program) add() []variable {
	cat := p.cat
	native := cat.Defaults.NativeSidecars
	var serverPath, inline, envNames []string
	for _, n := range cat.Names {
		e := cat.Plugins[n]
		if e.ServerPath != "" {
			serverPath = append(serverPath, n)
		}
		if e.InlineYAML != "" && e.Config.ConfigMap == nil {
			inline = append(inline, quote(n)+": "+quote(e.InlineYAML))
		}
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
			"variables.entries.map(p, variables.pluginVolumes[p]).flatten() + (variables.gitCreds ? " + strList([]string{keys.AskPassVolume}) + " : [])"},
		{"rsMountsAdded", "(" + hasMountAt(keys.PluginSocketDir) + " ? [] : " + strList([]string{keys.PluginsVolume}) + ") + " +
			"(variables.gitCreds && !" + hasMountAt(keys.AskPassDir) + " ? " + strList([]string{keys.AskPassVolume}) + " : [])"},
		{"rsEnvAdded", "(size(variables.rsc.?envFrom.orValue([])) > 0 ? [] : " + strList(envNames) + ".filter(n, !variables.rsc.?env.orValue([]).exists(x, x.name == n))) + " +
			"(variables.gitCreds ? " + strList([]string{keys.EnvAskPassSock}) + " : [])"},
		{"routes", "variables.entries.map(p, " + p.routes() + "[p]).flatten()"},
		{"initsAdded", inits},
		{"mainsAdded", mains},
		// The inline configs are written once, bound as in patchExpr.
		{"configs", "[{" + strings.Join(inline, ", ") + "}].map(inline, variables.entries.filter(p, p in inline).map(p, [p, inline[p]]))[0]"},
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
