package catalog

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// A plugin's private /tmp: where the sidecar unpacks every request's
// repository and where its commands write. It is an emptyDir, on the node's
// disk by default or, with tmpMedium Memory, a tmpfs. In memory, creating the
// many small files of a repository costs no disk I/O, but every byte stored
// there is the sidecar's memory: the kernel charges tmpfs pages to the memory
// cgroup of the container that wrote them, so they count against the
// sidecar's memory limit, and they cannot be reclaimed while the files exist.

// Catalog values of tmpMedium. Disk is Kubernetes' default medium (""), named
// so that a plugin can ask for it back when the default is Memory.
const (
	tmpMediumDisk   = "Disk"
	TmpMediumMemory = "Memory"
)

// tmpMedium is the emptyDir medium of a valid catalog value; "" (unset)
// and Disk are the node's default storage.
func tmpMedium(v string) corev1.StorageMedium {
	if v == TmpMediumMemory {
		return corev1.StorageMediumMemory
	}
	return corev1.StorageMediumDefault
}

// TmpSizeLimitFor returns the plugin's /tmp size limit, or the catalog
// default; nil means unbounded.
func (c *Catalog) TmpSizeLimitFor(e *Entry) *resource.Quantity {
	if e.TmpSizeLimit != nil {
		q := e.TmpSizeLimit.DeepCopy()
		return &q
	}
	if c.Defaults.TmpSizeLimit != nil {
		q := c.Defaults.TmpSizeLimit.DeepCopy()
		return &q
	}
	return nil
}

// TmpMediumFor returns the plugin's /tmp medium, or the catalog default, as
// an emptyDir medium.
func (c *Catalog) TmpMediumFor(e *Entry) corev1.StorageMedium {
	if e.TmpMedium != "" {
		return tmpMedium(e.TmpMedium)
	}
	return c.Defaults.TmpMedium
}

// validateTmp checks the media, then each plugin's resolved /tmp: in memory
// it needs a size limit, and that limit must stay below the sidecar's memory
// limit. Without a size limit the tmpfs is as large as the memory the pod may
// use, so a full /tmp is an OOM kill of the plugin server, mid-request,
// instead of a failed write the plugin's error names; a limit at or above the
// memory limit leaves the same outcome, since the server and the plugin's
// commands need memory too. Problems are reported on the field that decided
// (the plugin's own, else the default's) with the plugin named.
func validateTmp(p *problems, c *Catalog, d *Defaults, plugins map[string]*Plugin, names []string) {
	validTmpMedium(p, "defaults.tmpMedium", d.TmpMedium)
	for _, name := range names {
		pl, e := plugins[name], c.Plugins[name]
		if pl == nil || e == nil {
			continue
		}
		field := "plugins." + name
		if !validTmpMedium(p, field+".tmpMedium", pl.TmpMedium) || c.TmpMediumFor(e) != corev1.StorageMediumMemory {
			continue
		}
		mediumFrom := field + ".tmpMedium"
		if pl.TmpMedium == "" {
			mediumFrom = "defaults.tmpMedium"
		}
		size := c.TmpSizeLimitFor(e)
		if size == nil {
			p.addf(field, "/tmp in Memory (%s) needs a tmpSizeLimit, the plugin's or the default's: without one a full /tmp is an OOM kill of the plugin server instead of a failed write", mediumFrom)
			continue
		}
		sizeFrom := field + ".tmpSizeLimit"
		if pl.TmpSizeLimit == nil {
			sizeFrom = "defaults.tmpSizeLimit"
		}
		res := c.ResourcesFor(e)
		limit, ok := res.Limits[corev1.ResourceMemory]
		if ok && size.Cmp(limit) >= 0 {
			limitFrom := field + ".resources"
			if pl.Resources == nil {
				limitFrom = "defaults.resources"
			}
			p.addf(field, "/tmp in Memory (%s) may hold %s (%s), not below the sidecar's memory limit %s (%s): its files count against that limit, so a full /tmp would OOM-kill the plugin server; lower the size limit or raise the memory limit",
				mediumFrom, size.String(), sizeFrom, limit.String(), limitFrom)
		}
	}
}

// validTmpMedium reports whether v is a tmpMedium the catalog accepts, and
// adds the problem when not.
func validTmpMedium(p *problems, field, v string) bool {
	switch v {
	case "", tmpMediumDisk, TmpMediumMemory:
		return true
	}
	p.addf(field, "must be %s (the node's disk, the default) or %s (a tmpfs counted against the sidecar's memory limit) (got %q)", tmpMediumDisk, TmpMediumMemory, v)
	return false
}
