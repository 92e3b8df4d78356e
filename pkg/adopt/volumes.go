package adopt

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// defaultSizeLimit bounds an adopted emptyDir that had no limit: the
// catalog refuses an unbounded writable volume.
var defaultSizeLimit = resource.MustParse("1Gi")

// reservedPaths are where the injector mounts its own volumes in every
// sidecar (the catalog refuses volumes there, above or below).
var reservedPaths = []string{"/tmp", keys.VarFilesMountPath, keys.PluginSocketDir, keys.PluginConfigDir, keys.PluginHomeDir}

// extraMount carries one of the sidecar's other mounts into the catalog's
// volume form, or says why it cannot.
func (a *adopter) extraMount(pc *pluginCtx, m corev1.VolumeMount) {
	what := fmt.Sprintf("container %s's mount of volume %s at %s", pc.c.Name, m.Name, m.MountPath)
	v := pc.h.volume(m.Name)
	if v == nil {
		a.f.add(Essential, CodeVolumeNotFound, pc.id(), pc.name, what+" is lost: the input does not define the volume",
			"add the volume's definition to the input and run adopt again")
		return
	}
	filler := pc.h.filler(m.Name)
	if filler != nil && v.EmptyDir != nil {
		a.f.add(Essential, CodeToolsFromInitContainer, pc.id(), pc.name,
			fmt.Sprintf("%s is lost: init container %s (image %s) fills that volume, and the catalog runs no init container for a plugin", what, filler.Name, filler.Image),
			fmt.Sprintf("build an image FROM %s with what %s puts at %s, and set it as plugins.%s.image", pc.p.Image, filler.Name, m.MountPath, pc.name))
		return
	}
	if m.SubPath != "" || m.SubPathExpr != "" {
		a.f.add(Essential, CodeSubPathMount, pc.id(), pc.name,
			what+" is lost: it uses subPath, which catalog volumes cannot express",
			fmt.Sprintf("mount the whole volume at a directory (with items naming the key's file) in plugins.%s.volumes, or put the file into the image", pc.name))
		return
	}
	if r := slices.IndexFunc(reservedPaths, func(r string) bool { return overlaps(m.MountPath, r) }); r >= 0 {
		a.f.add(Essential, CodeMountPathReserved, pc.id(), pc.name,
			fmt.Sprintf("%s is lost: it overlaps %s, where the injector mounts its own", what, reservedPaths[r]),
			"mount it elsewhere and point the plugin there")
		return
	}
	vol := catalog.Volume{Name: a.volumeName(pc, v.Name), MountPath: m.MountPath, ReadOnly: m.ReadOnly}
	switch {
	case v.Secret != nil:
		vol.Secret = v.Secret.DeepCopy()
	case v.ConfigMap != nil:
		vol.ConfigMap = v.ConfigMap.DeepCopy()
	case v.Projected != nil && projectable(v.Projected):
		vol.Projected = v.Projected.DeepCopy()
	case v.EmptyDir != nil:
		if a.shared(pc, m.Name) {
			return
		}
		vol.EmptyDir = v.EmptyDir.DeepCopy()
		if vol.EmptyDir.SizeLimit == nil {
			q := defaultSizeLimit.DeepCopy()
			vol.EmptyDir.SizeLimit = &q
			a.f.add(Warning, CodeSizeLimitAdded, pc.id(), pc.name,
				fmt.Sprintf("emptyDir %s had no sizeLimit; the catalog bounds every writable volume, so it gets %s", v.Name, defaultSizeLimit.String()),
				fmt.Sprintf("set plugins.%s.volumes[%s].emptyDir.sizeLimit to what the plugin needs", pc.name, vol.Name))
		}
	default:
		a.f.add(Essential, CodeVolumeSourceUnsupported, pc.id(), pc.name,
			what+" is lost: the catalog's volumes are secret, configMap, projected (secret, configMap, serviceAccountToken) or emptyDir",
			"put what the volume held into the image, or into a Secret or ConfigMap")
		return
	}
	if vol.EmptyDir == nil && !m.ReadOnly && pc.ours == "" {
		a.f.add(Info, CodeReadOnlyInput, pc.id(), pc.name,
			what+" was writable; the injector mounts Secret, ConfigMap and projected volumes read-only", "")
	}
	if pc.ours != "" {
		vol.ReadOnly = vol.EmptyDir != nil && m.ReadOnly
	}
	pc.p.Volumes = append(pc.p.Volumes, vol)
}

// shared reports (with a finding) an emptyDir another container writes or
// reads too: the catalog's volumes belong to one sidecar.
func (a *adopter) shared(pc *pluginCtx, name string) bool {
	cs, inits := pc.h.mounters(name)
	var others []string
	for _, c := range append(cs, inits...) {
		if c != pc.c {
			others = append(others, c.Name)
		}
	}
	if len(others) == 0 {
		return false
	}
	a.f.add(Essential, CodeSharedVolume, pc.id(), pc.name,
		fmt.Sprintf("container %s shares emptyDir %s with %s; each injected sidecar has volumes of its own", pc.c.Name, name, strings.Join(others, ", ")),
		"exchange the data another way (a Secret, a ConfigMap, or the image)")
	return true
}

// projectable: the projected sources the catalog accepts.
func projectable(p *corev1.ProjectedVolumeSource) bool {
	for _, s := range p.Sources {
		if s.DownwardAPI != nil || s.ClusterTrustBundle != nil || s.PodCertificate != nil {
			return false
		}
	}
	return true
}

// volumeName is the catalog name of a pod volume: the injector's own
// cmp-<plugin>-v-<name> back to <name>; others as they are when the pod
// volume the injector will derive fits a DNS-1123 label, else shortened.
func (a *adopter) volumeName(pc *pluginCtx, name string) string {
	if pc.ours != "" {
		if n, ok := strings.CutPrefix(name, keys.PluginVolumeName(pc.ours, "")); ok {
			return n
		}
	}
	room := validation.DNS1123LabelMaxLength - len(keys.PluginVolumeName(pc.name, ""))
	out := sanitizeLabel(name, room)
	if out == "" {
		out = "v"
	}
	taken := func(n string) bool {
		return slices.ContainsFunc(pc.p.Volumes, func(v catalog.Volume) bool { return v.Name == n })
	}
	base := out
	for i := 2; taken(out); i++ {
		suffix := fmt.Sprintf("-%d", i)
		out = strings.TrimRight(truncate(base, room-len(suffix)), "-") + suffix
	}
	if out != name {
		a.f.add(Info, CodeVolumeRenamed, pc.id(), pc.name,
			fmt.Sprintf("volume %s is %s in the catalog (pod volume %s, at most %d characters)", name, out, keys.PluginVolumeName(pc.name, out), validation.DNS1123LabelMaxLength),
			"")
	}
	return out
}

// overlaps: a and b are the same path or one holds the other.
func overlaps(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}
