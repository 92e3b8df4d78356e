package inject

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// serveCommand runs the plugin server; probeCommand answers the kubelet's
// startupProbe on native sidecars. Both run the copied binary in the sidecar,
// with the sidecar's env and mounts, so they resolve the same socket.
const (
	serveCommand = "serve"
	probeCommand = "probe"
)

// The startupProbe gates the containers after a native sidecar (eventually the
// repo-server), which would otherwise enumerate sockets before the plugin
// listens and fall back to plain-directory manifests. One check a second for a
// minute; the kubelet's timeout stays above the probe's own 2 s --timeout.
const (
	probePeriodSeconds    = 1
	probeFailureThreshold = 60
	probeTimeoutSeconds   = 3
)

// restricted is the Pod Security "restricted" profile plus a read-only root:
// plugins write only to their private /tmp. uid 0 sets no UID (the catalog's
// Assigned policy): the platform assigns one, and runAsNonRoot still holds.
func restricted(uid int64) *corev1.SecurityContext {
	yes, no := true, false
	var runAs *int64
	if uid > 0 {
		runAs = &uid
	}
	return &corev1.SecurityContext{
		RunAsUser:                runAs,
		RunAsNonRoot:             &yes,
		AllowPrivilegeEscalation: &no,
		ReadOnlyRootFilesystem:   &yes,
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func copyContainer(c *catalog.Catalog, uid int64) corev1.Container {
	return corev1.Container{
		Name:            keys.CopyInitContainer,
		Image:           c.Defaults.CopyImage,
		ImagePullPolicy: c.Defaults.CopyImagePullPolicy,
		Command:         []string{keys.CopyServerBinary, "copy", keys.PluginServerPath},
		Resources:       *c.Defaults.Resources.DeepCopy(),
		VolumeMounts:    []corev1.VolumeMount{{Name: keys.VarFilesVolume, MountPath: keys.VarFilesMountPath}, noTokenMount()},
		SecurityContext: restricted(uid),
	}
}

func sidecar(c *catalog.Catalog, e *catalog.Entry, image string, uid int64, native bool) corev1.Container {
	mounts := []corev1.VolumeMount{
		// Read-only: one plugin must not be able to replace the server binary
		// that every other sidecar executes.
		{Name: keys.VarFilesVolume, MountPath: keys.VarFilesMountPath, ReadOnly: true},
		{Name: keys.PluginsVolume, MountPath: keys.PluginSocketDir},
		{Name: keys.TmpVolumeName(e.Name), MountPath: "/tmp"},
	}
	switch {
	case e.Config.ConfigMap != nil:
		mounts = append(mounts, corev1.VolumeMount{
			Name: keys.ConfigVolumeName(e.Name), MountPath: keys.PluginConfigDir + "/" + keys.PluginConfigFile,
			SubPath: e.Config.ConfigMap.Key, ReadOnly: true,
		})
	case e.InlineYAML != "":
		mounts = append(mounts, corev1.VolumeMount{
			Name: keys.ConfigVolumeName(e.Name), MountPath: keys.PluginConfigDir, ReadOnly: true,
		})
	}
	mounts = append(mounts, extraMounts(e)...)
	ctr := corev1.Container{
		Name:            keys.SidecarName(e.Name),
		Image:           image,
		ImagePullPolicy: e.ImagePullPolicy,
		Command:         []string{keys.PluginServerPath},
		Args:            []string{serveCommand},
		Env:             sidecarEnv(e),
		EnvFrom:         sidecarEnvFrom(e),
		Resources:       c.ResourcesFor(e),
		VolumeMounts:    mounts,
		SecurityContext: restricted(uid),
	}
	if native {
		always := corev1.ContainerRestartPolicyAlways
		ctr.RestartPolicy = &always
		// Only restartable init containers may have probes, and a classic
		// sidecar's startupProbe would gate nothing.
		ctr.StartupProbe = startupProbe()
	}
	return ctr
}

func startupProbe() *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{keys.PluginServerPath, probeCommand}}},
		PeriodSeconds:    probePeriodSeconds,
		FailureThreshold: probeFailureThreshold,
		TimeoutSeconds:   probeTimeoutSeconds,
	}
}

// pluginVolumes are the volumes one plugin owns: its /tmp, unless the image
// bakes it its config, then its home and catalog volumes.
func pluginVolumes(cat *catalog.Catalog, e *catalog.Entry) []corev1.Volume {
	vols := []corev1.Volume{{
		Name:         keys.TmpVolumeName(e.Name),
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: cat.TmpSizeLimitFor(e)}},
	}}
	switch {
	case e.Config.ConfigMap != nil:
		vols = append(vols, corev1.Volume{
			Name: keys.ConfigVolumeName(e.Name),
			VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: e.Config.ConfigMap.Name},
			}},
		})
	case e.InlineYAML != "":
		vols = append(vols, corev1.Volume{
			Name: keys.ConfigVolumeName(e.Name),
			VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
				Items: []corev1.DownwardAPIVolumeFile{{
					Path: keys.PluginConfigFile,
					FieldRef: &corev1.ObjectFieldSelector{
						FieldPath: "metadata.annotations['" + keys.ConfigAnnotationPrefix + e.Name + "']",
					},
				}},
			}},
		})
	}
	return append(vols, extraVolumes(e)...)
}

func emptyDir(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}
