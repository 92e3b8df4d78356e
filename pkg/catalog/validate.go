package catalog

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// validationError lists every problem of a catalog file, each prefixed by the
// path of the offending field.
type validationError struct {
	Problems []string
}

func (e *validationError) Error() string { return strings.Join(e.Problems, "; ") }

type problems []string

func (p *problems) addf(field, format string, args ...any) {
	*p = append(*p, field+": "+fmt.Sprintf(format, args...))
}

// validPullPolicy accepts the empty value, meaning the Kubernetes default.
func validPullPolicy(p *problems, field string, v corev1.PullPolicy) {
	switch v {
	case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		p.addf(field, "must be one of Always, IfNotPresent, Never (got %q)", v)
	}
}

func validateHeader(p *problems, f *catalogFile) {
	if f.APIVersion != APIVersion {
		p.addf("apiVersion", "must be %q (got %q)", APIVersion, f.APIVersion)
	}
	if f.Kind != Kind {
		p.addf("kind", "must be %q (got %q)", Kind, f.Kind)
	}
}

func validateDefaults(p *problems, d *Defaults) {
	if d.CopyImage == "" {
		p.addf("defaults.copyImage", "required")
	} else if _, err := parseImage(d.CopyImage); err != nil {
		p.addf("defaults.copyImage", "%v", err)
	}
	validPullPolicy(p, "defaults.copyImagePullPolicy", d.CopyImagePullPolicy)
	if d.RunAsUser != nil && *d.RunAsUser <= 0 {
		p.addf("defaults.runAsUser", "must be a non-root UID greater than 0 (got %d)", *d.RunAsUser)
	}
	switch d.RunAsUserPolicy {
	case "", runAsUserFixed:
	case runAsUserAssigned:
		if d.RunAsUser != nil {
			p.addf("defaults.runAsUser", "must not be set with runAsUserPolicy %s, which never sets a fixed UID (got %d)", runAsUserAssigned, *d.RunAsUser)
		}
	default:
		p.addf("defaults.runAsUserPolicy", "must be %s or %s (got %q)", runAsUserFixed, runAsUserAssigned, d.RunAsUserPolicy)
	}
	validateRepoServerContainer(p, d.RepoServerContainer)
	validSizeLimit(p, "defaults.tmpSizeLimit", d.TmpSizeLimit)
	if rs := d.RepoServer; rs != nil {
		if c := rs.CMPChunkSize; c != nil && (*c < 0 || *c > maxCMPChunkSize) {
			p.addf("defaults.repoServer.cmpChunkSize", "must be between 0 (the repo-server's default) and %d bytes (got %d)", maxCMPChunkSize, *c)
		}
		if ex := rs.PluginTarExclusions; ex != nil {
			for i, g := range *ex {
				field := fmt.Sprintf("defaults.repoServer.pluginTarExclusions[%d]", i)
				if _, err := filepath.Match(g, ""); err != nil || g == "" || strings.Contains(g, ";") {
					p.addf(field, "%q is not a glob the repo-server can use (filepath.Match syntax, not empty, no ';')", g)
				}
			}
		}
	}
}

// validateRepoServerContainer: the lists must recognise something (else no
// pod is ever injected) and hold only what can match a container.
func validateRepoServerContainer(p *problems, rc *RepoServerContainer) {
	if rc == nil {
		return
	}
	names, programs := rc.resolved()
	if len(names) == 0 && len(programs) == 0 {
		p.addf("defaults.repoServerContainer", "names and programs are both empty: no pod would ever be recognised as a repo-server")
	}
	for i, n := range names {
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			p.addf(fmt.Sprintf("defaults.repoServerContainer.names[%d]", i), "%q is not a container name: %s", n, strings.Join(errs, ", "))
		}
	}
	for i, n := range programs {
		if n == "" || strings.ContainsAny(n, "/ \t\n") {
			p.addf(fmt.Sprintf("defaults.repoServerContainer.programs[%d]", i), "%q must be an executable's base name (no path, no spaces)", n)
		}
	}
}

// validSizeLimit: an emptyDir sizeLimit of zero or less would make the
// kubelet evict the pod at its first write to /tmp.
func validSizeLimit(p *problems, field string, q *resource.Quantity) {
	if q != nil && q.Sign() <= 0 {
		p.addf(field, "must be a positive size such as 1Gi (got %s)", q.String())
	}
}

func validatePluginName(p *problems, name string) {
	field := "plugins." + name
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		p.addf(field, "invalid plugin name: %s", strings.Join(errs, ", "))
		return
	}
	// Every name derived from it (keys.DerivedNames) must stay a DNS-1123 label.
	if len(name) > keys.MaxPluginNameLen {
		p.addf(field, "plugin name longer than %d characters", keys.MaxPluginNameLen)
	}
	// Its sidecar would carry the name of a container the injector adds.
	if n := keys.SidecarName(name); n == keys.CopyInitContainer || n == keys.SocketsContainer {
		p.addf(field, "plugin name %q is reserved: its sidecar would be named %q, like the injector's own container", name, n)
	}
}

func validatePlugin(p *problems, name string, pl *Plugin) {
	field := "plugins." + name
	if pl == nil {
		p.addf(field, "empty plugin entry")
		return
	}
	if pl.Image == "" {
		p.addf(field+".image", "required")
	} else if _, err := parseImage(pl.Image); err != nil {
		p.addf(field+".image", "%v", err)
	}
	validPullPolicy(p, field+".imagePullPolicy", pl.ImagePullPolicy)
	validSizeLimit(p, field+".tmpSizeLimit", pl.TmpSizeLimit)
	for i, pat := range pl.AllowedImages {
		if _, err := parseImagePattern(pat); err != nil {
			p.addf(fmt.Sprintf("%s.allowedImages[%d]", field, i), "%v", err)
		}
	}
	validateEnv(p, field, pl)
	validateVolumes(p, name, pl.Volumes)
	validateHome(p, field+".home", pl.Home)
	validateServerPath(p, field+".serverPath", pl)
	validateConfigSource(p, field+".config", &pl.Config)
	validateTenancy(p, field, pl)
	validateRenderCache(p, field, pl)
}

func validateConfigSource(p *problems, field string, c *ConfigSource) {
	set := 0
	if len(c.Inline) > 0 && string(c.Inline) != "null" {
		set++
	}
	if c.ConfigMap != nil {
		set++
		if errs := validation.IsDNS1123Subdomain(c.ConfigMap.Name); len(errs) > 0 {
			p.addf(field+".configMap.name", "invalid ConfigMap name %q: %s", c.ConfigMap.Name, strings.Join(errs, ", "))
		}
		if c.ConfigMap.Key != "" {
			if errs := validation.IsConfigMapKey(c.ConfigMap.Key); len(errs) > 0 {
				p.addf(field+".configMap.key", "invalid key %q: %s", c.ConfigMap.Key, strings.Join(errs, ", "))
			}
		}
	}
	if c.FromImage {
		set++
	}
	if set != 1 {
		p.addf(field, "exactly one of inline, configMap, fromImage must be set (%d set)", set)
	}
}

func validateNamespaces(p *problems, namespaces map[string][]string, plugins map[string]*Plugin, known []string) {
	for _, ns := range slices.Sorted(maps.Keys(namespaces)) {
		field := "namespaces." + ns
		if ns != AllNamespaces {
			if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
				p.addf(field, "invalid namespace name: %s", strings.Join(errs, ", "))
			}
		}
		seen := map[string]bool{}
		for i, name := range namespaces[ns] {
			item := fmt.Sprintf("%s[%d]", field, i)
			switch {
			case plugins[name] == nil:
				p.addf(item, "unknown plugin %q (known: %s)", name, strings.Join(known, ", "))
			case seen[name]:
				p.addf(item, "duplicate plugin %q", name)
			}
			seen[name] = true
		}
	}
}

// validateSockets rejects two entries that would listen on the same socket
// file: the second sidecar would silently replace the first one's socket.
func validateSockets(p *problems, entries map[string]*Entry, names []string) {
	owner := map[string]string{}
	for _, name := range names {
		e := entries[name]
		if e == nil || e.Socket == "" {
			continue
		}
		if first, dup := owner[e.Socket]; dup {
			p.addf("plugins."+name+".config", "socket %q is already used by plugin %q: give one of them a different metadata.name or spec.version", e.Socket, first)
			continue
		}
		owner[e.Socket] = name
	}
}
