package adopt

import (
	"encoding/json"
	"path"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// askPassDir is the directory of the askpass socket a sidecar was pointed at
// (ARGOCD_ASK_PASS_SOCK, as Argo CD's documentation has both containers set
// it), or "" when it sets none.
func askPassDir(c corev1.Container) string {
	for _, e := range c.Env {
		if e.Name == keys.EnvAskPassSock && e.ValueFrom == nil && path.IsAbs(e.Value) {
			return path.Dir(path.Clean(e.Value))
		}
	}
	return ""
}

// gitCredentials carries the consent over. A hand-written sidecar whose
// plugin.yaml asks for provideGitCreds reached the repo-server's askpass
// socket through a volume it shared with it (the repo-server's whole /tmp,
// or a dedicated one): the catalog entry gets gitCredentials: true, without
// which the catalog refuses that plugin.yaml, and the injector then shares a
// dedicated askpass volume with this sidecar alone. The variable is the
// injector's to set, so it leaves the entry's env.
func (a *adopter) gitCredentials(pc *pluginCtx, sharedSocket bool) {
	pc.p.Env = slices.DeleteFunc(pc.p.Env, func(e corev1.EnvVar) bool { return e.Name == keys.EnvAskPassSock })
	if !providesGitCreds(pc.p.Config.Inline) {
		return
	}
	pc.p.GitCredentials = true
	if pc.ours != "" {
		return
	}
	how := "shared no askpass socket with the repo-server, so git in it got no credentials"
	if sharedSocket {
		how = "reached the repo-server's askpass socket through a volume it shared"
	} else if rs := pc.h.repoServerMount("/tmp"); rs != nil && slices.ContainsFunc(pc.c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == rs.Name && m.MountPath == "/tmp"
	}) {
		how = "reached the repo-server's askpass socket through the repo-server's /tmp, which it shared"
	}
	a.f.add(Warning, CodeGitCredentials, pc.id(), pc.name,
		"container "+pc.c.Name+"'s plugin.yaml sets provideGitCreds: true and the container "+how+
			"; plugins."+pc.name+".gitCredentials is true, the consent the catalog needs: the injector shares a dedicated askpass volume with this sidecar and no other",
		"keep it only if this plugin may receive the git credentials of every repository the repo-server clones for it")
}

// providesGitCreds reads spec.provideGitCreds of an inline plugin.yaml.
func providesGitCreds(inline json.RawMessage) bool {
	if len(inline) == 0 {
		return false
	}
	var doc struct {
		Spec struct {
			ProvideGitCreds bool `json:"provideGitCreds"`
		} `json:"spec"`
	}
	return json.Unmarshal(inline, &doc) == nil && doc.Spec.ProvideGitCreds
}

// releaseAskPass undoes the repo-server's half of a hand-made askpass share
// when a sidecar that used it is adopted: the injector refuses a repo-server
// that sets ARGOCD_ASK_PASS_SOCK itself (it puts the socket on the volume it
// shares with consenting plugins), and the volume goes with the sidecars when
// nothing else mounts it. The operator's CR keeps the repo-server's env in
// spec.repo.env: there it is a finding.
func (a *adopter) releaseAskPass(h *host, taken []string) {
	if h.repoServer < 0 {
		return
	}
	rs := &h.spec.Containers[h.repoServer]
	dir := askPassDir(*rs)
	if dir == "" {
		return
	}
	used := false
	for _, c := range allContainers(&h.spec) {
		used = used || (slices.Contains(taken, c.Name) && askPassDir(*c) == dir)
	}
	if !used {
		return
	}
	if h.operator() {
		a.f.add(Essential, CodeGitCredentials, h.obj.id(), "",
			"the repo-server sets "+keys.EnvAskPassSock+" for the adopted sidecars; the injector refuses a repo-server that sets it and shares its own askpass volume",
			"remove "+keys.EnvAskPassSock+" (and its volume) from spec.repo.env and spec.repo.volumes of the ArgoCD resource")
		return
	}
	var vol string
	rs.VolumeMounts = slices.DeleteFunc(rs.VolumeMounts, func(m corev1.VolumeMount) bool {
		if path.Clean(m.MountPath) == dir {
			vol = m.Name
			return true
		}
		return false
	})
	rs.Env = slices.DeleteFunc(rs.Env, func(e corev1.EnvVar) bool { return e.Name == keys.EnvAskPassSock })
	ctr := nthItem(h.pod, []string{"spec", "containers"}, h.repoServer)
	if ctr == nil {
		return
	}
	removeNamed(ctr, []string{"env"}, []string{keys.EnvAskPassSock})
	if vol != "" {
		removeNamed(ctr, []string{"volumeMounts"}, []string{vol})
	}
	a.f.add(Info, CodeGitCredentials, h.obj.id(), "",
		"the repo-server no longer sets "+keys.EnvAskPassSock+" nor mounts "+dir+": the injector moves its askpass socket to "+keys.AskPassSocket+" on a volume it shares with plugins that have gitCredentials",
		"")
}

// nthItem is the i-th element of the list at path under m, or nil.
func nthItem(m map[string]any, path []string, i int) map[string]any {
	parent := child(m, false, path[:len(path)-1]...)
	if parent == nil {
		return nil
	}
	items, _ := parent[path[len(path)-1]].([]any)
	if i < 0 || i >= len(items) {
		return nil
	}
	item, _ := items[i].(map[string]any)
	return item
}
