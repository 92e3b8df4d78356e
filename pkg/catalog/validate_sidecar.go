package catalog

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// What a plugin's sidecar gets besides its image and config: env from Secrets
// and ConfigMaps, volumes, a writable HOME. The catalog only ever names a
// Secret or ConfigMap; the kubelet reads it, the injector never does, so no
// secret value can reach the webhook's answers or logs.

// Bounds Kubernetes puts on a projected service-account token's lifetime.
const (
	minTokenExpirationSeconds = 600
	maxTokenExpirationSeconds = 1 << 32
)

// reservedMountPaths are the paths the injector mounts in every sidecar (or,
// for the HOME, in any sidecar with a home): a catalog volume there, above
// or below would hide or be hidden by them.
var reservedMountPaths = []string{"/tmp", keys.VarFilesMountPath, keys.PluginSocketDir, keys.PluginConfigDir, keys.PluginHomeDir, keys.ShmDir}

// homeEnv are the variables a plugin's home sets; the catalog's env must not
// set them as well (the container would have two values, the last winning).
var homeEnv = []string{keys.EnvHome, keys.EnvXDGCacheHome, keys.EnvXDGConfigHome, keys.EnvXDGDataHome}

// HomeEnv returns homeEnv, for adopt, which takes them out of an entry that
// gets its home back.
func HomeEnv() []string { return slices.Clone(homeEnv) }

// injectorEnv are the variables only the injector sets on a sidecar, from
// its entry's renderCache and Secret references. The entry's env must not
// set them (validateEnv and validateRenderCache refuse each with its own
// reason).
var injectorEnv = append(slices.Clone(renderCacheEnvNames), keys.EnvSecretEnv)

// InjectorEnv returns injectorEnv, for adopt, which must not carry them from
// an injected sidecar into an entry's env.
func InjectorEnv() []string { return slices.Clone(injectorEnv) }

func validateEnv(p *problems, field string, pl *Plugin) {
	for i, e := range pl.Env {
		f := fmt.Sprintf("%s.env[%d]", field, i)
		if errs := validation.IsEnvVarName(e.Name); len(errs) > 0 {
			p.addf(f+".name", "invalid name %q: %s", e.Name, strings.Join(errs, ", "))
		}
		if pl.Home != nil && slices.Contains(homeEnv, e.Name) {
			p.addf(f+".name", "%s is set by home (to a directory under %s); remove one of them", e.Name, keys.PluginHomeDir)
		}
		if e.Name == keys.EnvSecretEnv {
			p.addf(f+".name", "%s is set by the injector (which of the sidecar's variables come from Secrets, from envFrom and secretKeyRef); remove it", e.Name)
		}
		if e.ValueFrom == nil {
			continue
		}
		if e.Value != "" {
			p.addf(f, "value and valueFrom are both set; keep one")
		}
		vf := e.ValueFrom
		n := count(vf.FieldRef != nil, vf.ResourceFieldRef != nil, vf.ConfigMapKeyRef != nil, vf.SecretKeyRef != nil, vf.FileKeyRef != nil)
		if n != 1 {
			p.addf(f+".valueFrom", "exactly one of fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef, fileKeyRef must be set (%d set)", n)
		}
		if r := vf.SecretKeyRef; r != nil {
			objectKey(p, f+".valueFrom.secretKeyRef", "Secret", r.Name, r.Key)
		}
		if r := vf.ConfigMapKeyRef; r != nil {
			objectKey(p, f+".valueFrom.configMapKeyRef", "ConfigMap", r.Name, r.Key)
		}
	}
	for i, ef := range pl.EnvFrom {
		f := fmt.Sprintf("%s.envFrom[%d]", field, i)
		if n := count(ef.SecretRef != nil, ef.ConfigMapRef != nil); n != 1 {
			p.addf(f, "exactly one of secretRef, configMapRef must be set (%d set)", n)
		}
		if ef.SecretRef != nil {
			objectName(p, f+".secretRef.name", "Secret", ef.SecretRef.Name)
		}
		if ef.ConfigMapRef != nil {
			objectName(p, f+".configMapRef.name", "ConfigMap", ef.ConfigMapRef.Name)
		}
		if ef.Prefix != "" {
			if errs := validation.IsEnvVarName(ef.Prefix); len(errs) > 0 {
				p.addf(f+".prefix", "invalid prefix %q: %s", ef.Prefix, strings.Join(errs, ", "))
			}
		}
	}
}

func validateHome(p *problems, field string, h *Home) {
	if h == nil {
		return
	}
	if h.SizeLimit == nil {
		p.addf(field+".sizeLimit", "required: a writable HOME is bounded, e.g. 1Gi")
		return
	}
	validSizeLimit(p, field+".sizeLimit", h.SizeLimit)
}

func validateVolumes(p *problems, name string, vols []Volume) {
	field := "plugins." + name + ".volumes"
	names := map[string]int{}
	for i := range vols {
		v := &vols[i]
		f := fmt.Sprintf("%s[%d]", field, i)
		if errs := validation.IsDNS1123Label(v.Name); len(errs) > 0 {
			p.addf(f+".name", "invalid volume name %q: %s", v.Name, strings.Join(errs, ", "))
		} else if podName := keys.PluginVolumeName(name, v.Name); len(validation.IsDNS1123Label(podName)) > 0 {
			p.addf(f+".name", "the pod volume %q is longer than %d characters: shorten the plugin or volume name", podName, validation.DNS1123LabelMaxLength)
		}
		if j, dup := names[v.Name]; dup {
			p.addf(f+".name", "duplicate volume name %q (also volumes[%d])", v.Name, j)
		} else {
			names[v.Name] = i
		}
		validateMountPath(p, f+".mountPath", v.MountPath)
		for j := range i {
			if o := vols[j].MountPath; overlaps(v.MountPath, o) {
				p.addf(f+".mountPath", "%q overlaps volumes[%d]'s mountPath %q: one would hide the other", v.MountPath, j, o)
			}
		}
		validateVolumeSource(p, f, v)
	}
}

func validateMountPath(p *problems, field, mp string) {
	switch {
	case mp == "":
		p.addf(field, "required")
		return
	case !path.IsAbs(mp) || path.Clean(mp) != mp || mp == "/":
		p.addf(field, "%q must be an absolute, clean path other than / (no trailing /, no . or ..)", mp)
		return
	case strings.ContainsAny(mp, ":\n\r\t"):
		p.addf(field, "%q must not contain ':' or control characters", mp)
		return
	}
	for _, r := range reservedMountPaths {
		if overlaps(mp, r) {
			p.addf(field, "%q overlaps %s, which the injector mounts in every sidecar", mp, r)
		}
	}
	if mp != keys.ServiceAccountTokenDir && overlaps(mp, keys.ServiceAccountTokenDir) {
		p.addf(field, "%q overlaps %s: mount a token exactly there or elsewhere", mp, keys.ServiceAccountTokenDir)
	}
}

// overlaps reports whether a and b (clean absolute paths) are the same or one
// contains the other.
func overlaps(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}

func validateVolumeSource(p *problems, f string, v *Volume) {
	if n := count(v.Secret != nil, v.ConfigMap != nil, v.Projected != nil, v.EmptyDir != nil); n != 1 {
		p.addf(f, "exactly one of secret, configMap, projected, emptyDir must be set (%d set)", n)
	}
	if s := v.Secret; s != nil {
		objectName(p, f+".secret.secretName", "Secret", s.SecretName)
		validateItems(p, f+".secret.items", s.Items)
		validateMode(p, f+".secret.defaultMode", s.DefaultMode)
	}
	if c := v.ConfigMap; c != nil {
		objectName(p, f+".configMap.name", "ConfigMap", c.Name)
		validateItems(p, f+".configMap.items", c.Items)
		validateMode(p, f+".configMap.defaultMode", c.DefaultMode)
	}
	if pr := v.Projected; pr != nil {
		validateProjected(p, f+".projected", pr)
	}
	if e := v.EmptyDir; e != nil {
		switch e.Medium {
		case corev1.StorageMediumDefault, corev1.StorageMediumMemory:
		default:
			p.addf(f+".emptyDir.medium", "must be empty (the node's disk) or Memory (got %q)", e.Medium)
		}
		if e.SizeLimit == nil {
			p.addf(f+".emptyDir.sizeLimit", "required: a writable volume is bounded, e.g. 1Gi")
		} else {
			validSizeLimit(p, f+".emptyDir.sizeLimit", e.SizeLimit)
		}
	}
}

func validateProjected(p *problems, f string, pr *corev1.ProjectedVolumeSource) {
	if len(pr.Sources) == 0 {
		p.addf(f+".sources", "required: at least one of secret, configMap, serviceAccountToken")
	}
	validateMode(p, f+".defaultMode", pr.DefaultMode)
	for i, s := range pr.Sources {
		sf := fmt.Sprintf("%s.sources[%d]", f, i)
		if s.DownwardAPI != nil || s.ClusterTrustBundle != nil || s.PodCertificate != nil {
			p.addf(sf, "only secret, configMap and serviceAccountToken sources are supported in the catalog")
			continue
		}
		if n := count(s.Secret != nil, s.ConfigMap != nil, s.ServiceAccountToken != nil); n != 1 {
			p.addf(sf, "exactly one of secret, configMap, serviceAccountToken must be set (%d set)", n)
		}
		if s.Secret != nil {
			objectName(p, sf+".secret.name", "Secret", s.Secret.Name)
			validateItems(p, sf+".secret.items", s.Secret.Items)
		}
		if s.ConfigMap != nil {
			objectName(p, sf+".configMap.name", "ConfigMap", s.ConfigMap.Name)
			validateItems(p, sf+".configMap.items", s.ConfigMap.Items)
		}
		if t := s.ServiceAccountToken; t != nil {
			tf := sf + ".serviceAccountToken"
			if strings.TrimSpace(t.Audience) == "" {
				p.addf(tf+".audience", "required: name the service that will read the token (e.g. vault), so it is useless to the Kubernetes API and to anyone else")
			}
			if e := t.ExpirationSeconds; e != nil && (*e < minTokenExpirationSeconds || *e > maxTokenExpirationSeconds) {
				p.addf(tf+".expirationSeconds", "must be between %d and %d (got %d)", minTokenExpirationSeconds, int64(maxTokenExpirationSeconds), *e)
			}
			validateRelativePath(p, tf+".path", t.Path)
		}
	}
}

func validateItems(p *problems, f string, items []corev1.KeyToPath) {
	for i, it := range items {
		itf := fmt.Sprintf("%s[%d]", f, i)
		if errs := validation.IsConfigMapKey(it.Key); len(errs) > 0 {
			p.addf(itf+".key", "invalid key %q: %s", it.Key, strings.Join(errs, ", "))
		}
		validateRelativePath(p, itf+".path", it.Path)
		validateMode(p, itf+".mode", it.Mode)
	}
}

func validateRelativePath(p *problems, f, rel string) {
	if rel == "" || path.IsAbs(rel) || slices.Contains(strings.Split(rel, "/"), "..") {
		p.addf(f, "%q must be a relative path without '..'", rel)
	}
}

func validateMode(p *problems, f string, m *int32) {
	if m != nil && (*m < 0 || *m > 0o777) {
		p.addf(f, "must be a file mode between 0 and 0777 (got %d)", *m)
	}
}

func objectName(p *problems, f, kind, name string) {
	if name == "" {
		p.addf(f, "required: the name of a %s in the repo-server's namespace", kind)
		return
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		p.addf(f, "invalid %s name %q: %s", kind, name, strings.Join(errs, ", "))
	}
}

func objectKey(p *problems, f, kind, name, key string) {
	objectName(p, f+".name", kind, name)
	if errs := validation.IsConfigMapKey(key); len(errs) > 0 {
		p.addf(f+".key", "invalid %s key %q: %s", kind, key, strings.Join(errs, ", "))
	}
}

func count(set ...bool) int {
	n := 0
	for _, b := range set {
		if b {
			n++
		}
	}
	return n
}

// validatePodVolumeNames: the pod volumes of all plugins, and the injector's
// shared ones, have distinct names, whatever plugins a pod asks for together.
// A plugin's volume name could otherwise spell another plugin's derived name:
// plugin a's volume x-tmp is cmp-a-v-x-tmp, the /tmp of plugin a-v-x.
func validatePodVolumeNames(p *problems, plugins map[string]*Plugin, names []string) {
	owner := map[string]string{
		keys.VarFilesVolume: "the injector", keys.PluginsVolume: "the injector", keys.NoTokenVolume: "the injector",
	}
	claim := func(field, podName, by string) {
		if first, dup := owner[podName]; dup && first != by {
			p.addf(field, "pod volume %q is also a volume of %s: rename one of them", podName, first)
			return
		}
		owner[podName] = by
	}
	for _, name := range names {
		pl := plugins[name]
		if pl == nil {
			continue
		}
		by := fmt.Sprintf("plugin %q", name)
		for _, n := range []string{keys.TmpVolumeName(name), keys.ConfigVolumeName(name), keys.HomeVolumeName(name)} {
			claim("plugins."+name, n, by)
		}
		for i, v := range pl.Volumes {
			claim(fmt.Sprintf("plugins.%s.volumes[%d].name", name, i), keys.PluginVolumeName(name, v.Name), by)
		}
	}
}
