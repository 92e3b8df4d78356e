package catalog

import (
	"path"
	"slices"
	"strings"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// A plugin's image may carry the plugin server itself: the library's images
// (deploy/plugins, built by hack/images) hold cmp-server at
// /usr/local/bin/cmp-server, byte for byte the copy image's. The admin says
// so with serverPath, and the injector believes nothing else: not the image
// (it never pulls one), not the pod. For a pod whose every plugin has one, it
// leaves out the copy init container, whose run costs the pod's start about a
// kubelet relist (docs/performance.md), and each sidecar runs the server of
// its own image; a pod with one plugin without it keeps the copy for all
// (pkg/inject's serverChoice).

// validateServerPath: serverPath names a file in the image that the sidecar
// can run, which no mount of the injector's or the catalog's hides.
func validateServerPath(p *problems, field string, pl *Plugin) {
	sp := pl.ServerPath
	if sp == "" {
		return
	}
	if !path.IsAbs(sp) || path.Clean(sp) != sp || sp == "/" || strings.ContainsFunc(sp, isControl) {
		p.addf(field, "%q must be the absolute, clean path of cmp-server in the plugin's image, e.g. %s (no trailing /, no . or .., no control characters)",
			sp, keys.CopyServerBinary)
		return
	}
	if under(sp, keys.VarFilesMountPath) {
		p.addf(field, "%q is where the copy init container puts the server, not a path in the image: give where the image holds cmp-server, e.g. %s",
			sp, keys.CopyServerBinary)
		return
	}
	// What the injector mounts in the sidecar, and the catalog's volumes.
	mounted := slices.Concat(reservedMountPaths, []string{keys.ServiceAccountTokenDir})
	if pl.GitCredentials {
		mounted = append(mounted, keys.AskPassDir)
	}
	for _, v := range pl.Volumes {
		if path.IsAbs(v.MountPath) {
			mounted = append(mounted, path.Clean(v.MountPath))
		}
	}
	for _, dir := range mounted {
		if under(sp, dir) {
			p.addf(field, "%q is under %s, which is mounted over in the sidecar: the image's file there is hidden", sp, dir)
		}
	}
}

// under reports whether file is dir or inside it (both clean and absolute).
func under(file, dir string) bool {
	return file == dir || strings.HasPrefix(file, strings.TrimSuffix(dir, "/")+"/")
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }
