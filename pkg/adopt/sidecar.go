package adopt

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// adoptHost turns each CMP sidecar of h into a catalog entry and takes the
// adopted ones out of h.
func (a *adopter) adoptHost(h *host) {
	ns := a.namespaceOf(h.obj)
	a.ourDefaults(h)
	var taken, names []string
	classic := false
	for _, sc := range h.sidecars() {
		if h.oursSockets(sc.c.Name) {
			// The injector's sockets container goes with the sidecars it
			// served; the injector adds it again.
			taken = append(taken, sc.c.Name)
			continue
		}
		pc := &pluginCtx{h: h, c: sc.c, native: sc.native, ours: sc.ours, ns: ns}
		want := strings.TrimPrefix(sc.c.Name, keys.SidecarPrefix)
		if sc.ours != "" {
			want = sc.ours
		}
		pc.name = a.catalogName(want)
		if pc.name != want {
			a.f.add(Info, CodeNameChanged, pc.id(), pc.name,
				fmt.Sprintf("container %s becomes catalog plugin %s (its sidecar %s): %q is not a free catalog name of at most %d characters", sc.c.Name, pc.name, keys.SidecarName(pc.name), want, keys.MaxPluginNameLen),
				"")
		}
		if !a.buildPlugin(pc) {
			a.f.add(Essential, CodeNotAdopted, pc.id(), pc.name,
				"container "+sc.c.Name+" was not adopted and stays in the workload",
				"act on the finding before this one, then run adopt again")
			continue
		}
		a.addPlugin(pc, sc.c.Name)
		taken = append(taken, sc.c.Name)
		names = append(names, pc.name)
		classic = classic || (!sc.native && sc.ours == "")
	}
	if classic {
		a.f.add(Info, CodeNativeSidecars, h.obj.id(), "",
			"the injected sidecars are native (init containers with restartPolicy Always, Kubernetes 1.29+), which start before the repo-server and stop after it",
			"on a cluster older than 1.29 set defaults.nativeSidecars: false in the catalog")
	}
	if len(taken) > 0 {
		a.editHost(h, taken, names)
	}
}

// ourDefaults takes the catalog defaults from the injector's own copy init
// container, when the input is our injected output; from its sockets
// container, which runs the same image with the same resources, when the
// sidecars ran their images' server and there was no copy.
func (a *adopter) ourDefaults(h *host) {
	if h.status == nil {
		return
	}
	var from *corev1.Container
	for _, list := range [][]corev1.Container{h.spec.InitContainers, h.spec.Containers} {
		for i := range list {
			switch c := &list[i]; {
			case c.Name == keys.CopyInitContainer:
				from = c
			case from == nil && h.oursSockets(c.Name):
				from = c
			}
		}
	}
	if from != nil {
		a.defaults.CopyImage, a.defaults.CopyImagePullPolicy = from.Image, from.ImagePullPolicy
		a.defaults.Resources = from.Resources.DeepCopy()
	}
	for _, name := range h.status.Containers {
		if h.oursName(name) != "" {
			a.defaults.NativeSidecars = catalog.NativeSidecarsOff
		}
	}
}

// buildPlugin fills pc.p from the sidecar; false when the sidecar cannot
// be adopted at all (no image, no plugin.yaml).
func (a *adopter) buildPlugin(pc *pluginCtx) bool {
	c := pc.c
	p := &catalog.Plugin{Image: c.Image, ImagePullPolicy: c.ImagePullPolicy}
	pc.p = p
	if p.Image == "" {
		p.Image = first(a.opts.ArgoCDImage, pc.h.image)
		if p.Image == "" {
			a.f.add(Essential, CodeImageUnknown, pc.id(), pc.name,
				"container "+c.Name+" names no image: the operator runs it with its repo-server image, which the input does not say",
				"run adopt with --argocd-image set to the repo-server's image (kubectl get deployment <name>-repo-server -o jsonpath='{.spec.template.spec.containers[0].image}')")
			return false
		}
	}
	for _, e := range c.Env {
		p.Env = append(p.Env, *e.DeepCopy())
	}
	for _, e := range c.EnvFrom {
		p.EnvFrom = append(p.EnvFrom, *e.DeepCopy())
	}
	a.injectorEnv(pc)
	if !equality.Semantic.DeepEqual(c.Resources, corev1.ResourceRequirements{}) &&
		(pc.ours == "" || a.defaults.Resources == nil || !equality.Semantic.DeepEqual(c.Resources, *a.defaults.Resources)) {
		p.Resources = c.Resources.DeepCopy()
	}
	if pc.ours == "" {
		a.checkCommand(pc)
		a.checkSecurity(pc)
		a.checkDropped(pc)
	} else if len(c.Command) > 0 && c.Command[0] != keys.PluginServerPath && path.IsAbs(c.Command[0]) {
		// Our sidecar ran the server its image carries (serverPath).
		p.ServerPath = c.Command[0]
	}
	configured := false
	askDir := askPassDir(*c)
	for _, m := range c.VolumeMounts {
		switch {
		case m.MountPath == keys.VarFilesMountPath, m.MountPath == keys.PluginSocketDir:
			// The injector mounts both itself.
		case askDir != "" && path.Clean(m.MountPath) == askDir:
			// The askpass socket's volume: the injector shares its own
			// with a consenting plugin (gitCredentials below).
		case m.MountPath == "/tmp":
			a.tmpMount(pc, m)
		case isConfigMount(m):
			cfg, ok := a.configFrom(pc, m)
			if !ok {
				return false
			}
			p.Config, configured = cfg, true
		case pc.ours != "" && (m.Name == keys.NoTokenVolume || m.MountPath == keys.ShmDir):
		case pc.ours != "" && m.MountPath == keys.PluginHomeDir:
			a.homeMount(pc, m)
		default:
			a.extraMount(pc, m)
		}
	}
	if !configured {
		p.Config.FromImage = true
		if pc.ours == "" {
			a.f.add(Warning, CodeConfigFromImage, pc.id(), pc.name,
				"container "+c.Name+" mounts no plugin.yaml, so image "+p.Image+" bakes "+configFilePath+"; adopt cannot read images and sets config.fromImage: true",
				"check that the image has it: docker run --rm --entrypoint cat "+p.Image+" "+configFilePath+
					" (or copy it into plugins."+pc.name+".config.inline)")
		}
	}
	if pc.ours == "" {
		a.checkToken(pc)
	}
	a.gitCredentials(pc, askDir != "")
	return true
}

// tmpMount: every injected sidecar gets a private /tmp; its size limit is
// carried over.
func (a *adopter) tmpMount(pc *pluginCtx, m corev1.VolumeMount) {
	v := pc.h.volume(m.Name)
	if v != nil && v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil {
		q := v.EmptyDir.SizeLimit.DeepCopy()
		pc.p.TmpSizeLimit = &q
	}
	if pc.ours != "" {
		return
	}
	if rs := pc.h.repoServerMount("/tmp"); (rs != nil && rs.Name == m.Name) || (pc.h.operator() && m.Name == "tmp") {
		a.f.add(Info, CodeSharedVolume, pc.id(), pc.name,
			"container "+pc.c.Name+" shared the repo-server's /tmp (volume "+m.Name+"); the injected sidecar gets a private one, as Argo CD advises since v2.4",
			"")
	}
}

// homeMount is the injector's writable HOME (our own output only).
func (a *adopter) homeMount(pc *pluginCtx, m corev1.VolumeMount) {
	v := pc.h.volume(m.Name)
	if v == nil || v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil {
		a.extraMount(pc, m)
		return
	}
	q := v.EmptyDir.SizeLimit.DeepCopy()
	pc.p.Home = &catalog.Home{SizeLimit: &q}
	home := catalog.HomeEnv()
	pc.p.Env = slices.DeleteFunc(pc.p.Env, func(e corev1.EnvVar) bool {
		return slices.Contains(home, e.Name)
	})
}

// checkCommand: the injected sidecar runs cmp-server serve, a drop-in for
// argocd-cmp-server; anything else the hand-written one ran is lost.
func (a *adopter) checkCommand(pc *pluginCtx) {
	c := pc.c
	w := words(*c)
	switch {
	case len(w) == 0:
		a.f.add(Warning, CodeEntrypointAssumed, pc.id(), pc.name,
			"container "+c.Name+" names no command, so its image's entrypoint ran; the injected sidecar runs cmp-server serve",
			"check that the image's entrypoint did nothing but start argocd-cmp-server")
	case program(*c) == ourServerProgram && (len(w) == 1 || w[1] == "serve"):
		// Our plugin server, run as the injected sidecar runs it: from the
		// image itself when its path is not the copy's, which the catalog
		// says with serverPath (no copy init container for it).
		if path.IsAbs(w[0]) && !strings.HasPrefix(w[0], keys.VarFilesMountPath+"/") {
			pc.p.ServerPath = w[0]
		}
		if len(w) > 2 {
			a.f.add(Warning, CodeArgsDropped, pc.id(), pc.name,
				fmt.Sprintf("cmp-server serve's arguments %q are dropped", strings.Join(w[2:], " ")),
				"cmp-server reads its flags from its environment as well (cmp-server serve --help names each variable): set them in plugins."+pc.name+".env")
		}
	case program(*c) != cmpServerProgram:
		a.f.add(Essential, CodeCustomCommand, pc.id(), pc.name,
			fmt.Sprintf("container %s runs %q, not argocd-cmp-server; the injected sidecar runs cmp-server serve, so whatever that command did before serving is lost", c.Name, strings.Join(w, " ")),
			"move that work into the image (or into the plugin's init command in plugin.yaml)")
	case len(w) > 1:
		a.f.add(Warning, CodeArgsDropped, pc.id(), pc.name,
			fmt.Sprintf("argocd-cmp-server's arguments %q are dropped", strings.Join(w[1:], " ")),
			"cmp-server reads its log level and format from "+keys.EnvCMPServerLogLevel+" and "+keys.EnvCMPServerLogFormat+": set them in plugins."+pc.name+".env")
	}
}

// checkSecurity names what differs from the restricted context every
// injected sidecar gets.
func (a *adopter) checkSecurity(pc *pluginCtx) {
	sc := pc.c.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	var lost []string
	if sc.Privileged != nil && *sc.Privileged {
		lost = append(lost, "privileged")
	}
	if sc.Capabilities != nil && len(sc.Capabilities.Add) > 0 {
		lost = append(lost, fmt.Sprintf("capabilities.add %v", sc.Capabilities.Add))
	}
	if sc.AllowPrivilegeEscalation != nil && *sc.AllowPrivilegeEscalation {
		lost = append(lost, "allowPrivilegeEscalation")
	}
	if sc.RunAsNonRoot != nil && !*sc.RunAsNonRoot {
		lost = append(lost, "runAsNonRoot: false")
	}
	if uid := pc.h.repoServerUID(); sc.RunAsUser != nil && *sc.RunAsUser != uid {
		lost = append(lost, fmt.Sprintf("runAsUser %d (the injected sidecar runs as the repo-server's UID, %d)", *sc.RunAsUser, uid))
	}
	if sc.RunAsGroup != nil {
		lost = append(lost, "runAsGroup")
	}
	if sc.SELinuxOptions != nil || sc.AppArmorProfile != nil || sc.WindowsOptions != nil || sc.ProcMount != nil {
		lost = append(lost, "seLinuxOptions/appArmorProfile/windowsOptions/procMount")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		lost = append(lost, "a writable root filesystem")
	}
	if len(lost) == 0 {
		return
	}
	a.f.add(Warning, CodeSecurityContext, pc.id(), pc.name,
		"container "+pc.c.Name+"'s security context gave it "+strings.Join(lost, ", ")+"; the injected sidecar runs restricted (non-root, no capabilities, no privilege escalation, read-only root filesystem)",
		"a plugin that writes outside /tmp needs a writable HOME (plugins."+pc.name+".home) or an emptyDir volume")
}

// repoServerUID is the UID the injected sidecars will run as.
func (h *host) repoServerUID() int64 {
	if h.repoServer >= 0 {
		if sc := h.spec.Containers[h.repoServer].SecurityContext; sc != nil && sc.RunAsUser != nil {
			return *sc.RunAsUser
		}
	}
	if sc := h.spec.SecurityContext; sc != nil && sc.RunAsUser != nil {
		return *sc.RunAsUser
	}
	return keys.DefaultArgoCDUID
}

// checkDropped names container fields the catalog has no place for.
func (a *adopter) checkDropped(pc *pluginCtx) {
	c := pc.c
	var dropped []string
	add := func(set bool, name string) {
		if set {
			dropped = append(dropped, name)
		}
	}
	add(len(c.Ports) > 0, "ports")
	add(c.LivenessProbe != nil, "livenessProbe")
	add(c.ReadinessProbe != nil, "readinessProbe")
	add(c.StartupProbe != nil, "startupProbe")
	add(c.Lifecycle != nil, "lifecycle")
	add(c.WorkingDir != "", "workingDir")
	add(c.Stdin || c.StdinOnce || c.TTY, "stdin/tty")
	add(len(c.VolumeDevices) > 0, "volumeDevices")
	add(len(c.ResizePolicy) > 0, "resizePolicy")
	for _, m := range c.VolumeMounts {
		add(m.MountPropagation != nil && *m.MountPropagation != corev1.MountPropagationNone, "mountPropagation of "+m.MountPath)
	}
	if len(dropped) == 0 {
		return
	}
	a.f.add(Warning, CodeFieldDropped, pc.id(), pc.name,
		"container "+c.Name+"'s "+strings.Join(dropped, ", ")+" are dropped: the catalog has no place for them (native sidecars get cmp-server's own startup probe)",
		"")
}

// checkToken: the injector mounts an empty directory over the service
// account token in every sidecar; one that read the repo-server's token
// (argocd-vault-plugin's Kubernetes auth) loses it.
func (a *adopter) checkToken(pc *pluginCtx) {
	if slices.ContainsFunc(pc.c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == keys.ServiceAccountTokenDir }) {
		return
	}
	auto := pc.h.spec.AutomountServiceAccountToken
	if auto != nil && !*auto {
		return
	}
	sev := Info
	if auto != nil {
		sev = Warning // someone asked for the token on purpose
	}
	for _, e := range pc.c.Env {
		if e.Name == "AVP_AUTH_TYPE" && e.Value == "k8s" {
			sev = Essential
		}
	}
	a.f.add(sev, CodeServiceAccountToken, pc.id(), pc.name,
		"container "+pc.c.Name+" could read the repo-server's service-account token (Argo CD's RBAC); the injected sidecar gets an empty "+keys.ServiceAccountTokenDir,
		"if the plugin authenticates with it (argocd-vault-plugin's Kubernetes auth to Vault), add to plugins."+pc.name+".volumes a projected serviceAccountToken with the audience your Vault role expects, mounted at "+keys.ServiceAccountTokenDir)
}
