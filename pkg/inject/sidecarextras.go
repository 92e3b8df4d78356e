package inject

import (
	"path"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// What the catalog's envFrom, volumes and home build into a plugin's sidecar,
// and the empty mount that keeps the repo-server's service-account token out
// of every container the injector adds.

// homeEnv points a plugin's HOME and XDG directories into its writable home;
// it comes before the catalog's env so that env can refer to $(HOME).
func homeEnv(e *catalog.Entry) []corev1.EnvVar {
	if e.Home == nil {
		return nil
	}
	return []corev1.EnvVar{
		{Name: keys.EnvHome, Value: keys.PluginHomeDir},
		{Name: keys.EnvXDGCacheHome, Value: path.Join(keys.PluginHomeDir, ".cache")},
		{Name: keys.EnvXDGConfigHome, Value: path.Join(keys.PluginHomeDir, ".config")},
		{Name: keys.EnvXDGDataHome, Value: path.Join(keys.PluginHomeDir, ".local", "share")},
	}
}

// sidecarEnv is the sidecar's env: its home's, then the catalog's as written
// (valueFrom references included: the kubelet resolves them, not us), then
// which of them come from Secrets (secretenv.go).
func sidecarEnv(e *catalog.Entry) []corev1.EnvVar {
	env := homeEnv(e)
	for _, v := range e.Env {
		env = append(env, *v.DeepCopy())
	}
	env = append(env, renderCacheEnv(e.RenderCache)...)
	return withSecretEnv(env, e)
}

// renderCacheEnv is cmp-server's render cache as the catalog entry sets it
// (the server's --render-cache-* flags read these); none when it is off.
func renderCacheEnv(rc *catalog.RenderCache) []corev1.EnvVar {
	if rc == nil {
		return nil
	}
	env := []corev1.EnvVar{{Name: keys.EnvRenderCacheSize, Value: strconv.FormatInt(rc.Size.Value(), 10)}}
	if rc.TTL != nil {
		env = append(env, corev1.EnvVar{Name: keys.EnvRenderCacheTTL, Value: rc.TTL.Duration.String()})
	}
	if rc.RevisionIndependent {
		env = append(env, corev1.EnvVar{Name: keys.EnvRenderCacheRevisionIndependent, Value: "true"})
	}
	if rc.AllowSecrets {
		env = append(env, corev1.EnvVar{Name: keys.EnvRenderCacheAllowSecrets, Value: "true"})
	}
	return env
}

// sidecarEnvFrom copies the catalog's Secret and ConfigMap references.
func sidecarEnvFrom(e *catalog.Entry) []corev1.EnvFromSource {
	var out []corev1.EnvFromSource
	for _, ef := range e.EnvFrom {
		out = append(out, *ef.DeepCopy())
	}
	return out
}

// extraMounts are the sidecar's home, its catalog volumes (inputs always
// read-only: a plugin must not rewrite the key or token it was given, and
// Kubernetes ignores writes to them anyway after the next sync), and the
// token shadow unless a catalog volume is mounted at the token directory.
func extraMounts(e *catalog.Entry) []corev1.VolumeMount {
	var mounts []corev1.VolumeMount
	if e.Home != nil {
		mounts = append(mounts, corev1.VolumeMount{Name: keys.HomeVolumeName(e.Name), MountPath: keys.PluginHomeDir})
	}
	tokenDir := false
	for i := range e.Volumes {
		v := &e.Volumes[i]
		mounts = append(mounts, corev1.VolumeMount{
			Name: keys.PluginVolumeName(e.Name, v.Name), MountPath: v.MountPath, ReadOnly: v.ReadOnly || v.IsInput(),
		})
		tokenDir = tokenDir || v.MountPath == keys.ServiceAccountTokenDir
	}
	if !tokenDir {
		mounts = append(mounts, noTokenMount())
	}
	return mounts
}

// noTokenMount covers the directory where Kubernetes' ServiceAccount admission
// (re-run after the webhook mutates the pod) would mount the pod's default
// token into every container that mounts nothing there. The repo-server's
// token may read the cluster's Secrets with Argo CD's RBAC; a plugin runs
// commands from repositories and must not hold it. A plugin that needs a
// token gets one from a catalog projected volume, for its own audience.
func noTokenMount() corev1.VolumeMount {
	return corev1.VolumeMount{Name: keys.NoTokenVolume, MountPath: keys.ServiceAccountTokenDir, ReadOnly: true}
}

// extraVolumes are the pod volumes of a plugin's home and catalog volumes.
func extraVolumes(e *catalog.Entry) []corev1.Volume {
	var vols []corev1.Volume
	if e.Home != nil {
		limit := e.Home.SizeLimit.DeepCopy()
		vols = append(vols, corev1.Volume{
			Name:         keys.HomeVolumeName(e.Name),
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}},
		})
	}
	for i := range e.Volumes {
		v := &e.Volumes[i]
		src := corev1.VolumeSource{
			Secret:    v.Secret.DeepCopy(),
			ConfigMap: v.ConfigMap.DeepCopy(),
			Projected: v.Projected.DeepCopy(),
			EmptyDir:  v.EmptyDir.DeepCopy(),
		}
		vols = append(vols, corev1.Volume{Name: keys.PluginVolumeName(e.Name, v.Name), VolumeSource: src})
	}
	return vols
}

// Defaults the apiserver gives the volume sources above, so that a stored
// pod compares equal to what the catalog builds.
const (
	defaultVolumeMode             int32 = 0o644
	defaultTokenExpirationSeconds int64 = 3600
)

// extraVolumesDrift names each of the plugin's home and catalog volumes whose
// source in the pod is not what the catalog builds now (a renamed Secret, a
// new audience, another size limit): only a new pod takes it.
func extraVolumesDrift(pod *corev1.Pod, e *catalog.Entry) []string {
	have := map[string]*corev1.Volume{}
	for i := range pod.Spec.Volumes {
		have[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	var out []string
	for _, want := range extraVolumes(e) {
		h := have[want.Name]
		switch {
		case h == nil:
			out = append(out, "volume "+want.Name+" is missing")
		case !equality.Semantic.DeepEqual(h.VolumeSource, storedSource(want.VolumeSource)):
			out = append(out, "volume "+want.Name+"'s source differs from the catalog's")
		}
	}
	return out
}

// storedSource is s with the apiserver's defaults applied.
func storedSource(s corev1.VolumeSource) corev1.VolumeSource {
	s = *s.DeepCopy()
	mode := func(m **int32) {
		if *m == nil {
			v := defaultVolumeMode
			*m = &v
		}
	}
	if s.Secret != nil {
		mode(&s.Secret.DefaultMode)
	}
	if s.ConfigMap != nil {
		mode(&s.ConfigMap.DefaultMode)
	}
	if s.Projected != nil {
		mode(&s.Projected.DefaultMode)
		for i := range s.Projected.Sources {
			if t := s.Projected.Sources[i].ServiceAccountToken; t != nil && t.ExpirationSeconds == nil {
				v := defaultTokenExpirationSeconds
				t.ExpirationSeconds = &v
			}
		}
	}
	return s
}
