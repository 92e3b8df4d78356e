package policy

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

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
