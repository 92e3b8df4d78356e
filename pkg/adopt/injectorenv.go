package adopt

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// injectorEnv takes out of the entry's env the variables the catalog
// refuses there because the injector computes them from the entry
// (catalog.InjectorEnv): copied as they were, they made an adopted injected
// sidecar's catalog fail to load. The render cache's become renderCache
// again; the Secret rule is dropped, as the injector makes it again from the
// entry's secretKeyRef and envFrom Secrets.
func (a *adopter) injectorEnv(pc *pluginCtx) {
	reserved := catalog.InjectorEnv()
	set := map[string]corev1.EnvVar{}
	pc.p.Env = slices.DeleteFunc(pc.p.Env, func(e corev1.EnvVar) bool {
		if !slices.Contains(reserved, e.Name) {
			return false
		}
		set[e.Name] = e // the last of a name wins, as in the container
		return true
	})
	a.renderCache(pc, set)
	if _, ok := set[keys.EnvSecretEnv]; ok && pc.ours == "" {
		a.f.add(Info, CodeInjectorEnv, pc.id(), pc.name,
			"container "+pc.c.Name+"'s "+keys.EnvSecretEnv+" is dropped: the injector sets it from the entry's secretKeyRef env and envFrom Secrets",
			"if it named a variable that holds a Secret value but is set another way, take that value from a Secret in plugins."+pc.name+".env")
	}
}

// renderCache reads back the renderCache the injector wrote as env (inject's
// renderCacheEnv), each value parsed as cmp-server parses it. One value it
// refuses, or adopt cannot read (valueFrom), leaves the entry with no cache
// at all: a guessed size, ttl or allowSecrets would be a statement about the
// plugin the admin never made, and no cache only costs speed.
func (a *adopter) renderCache(pc *pluginCtx, set map[string]corev1.EnvVar) {
	var named, bad []string
	value := func(name string) (string, bool) {
		e, ok := set[name]
		if !ok {
			return "", false
		}
		named = append(named, name)
		if e.ValueFrom != nil {
			bad = append(bad, name+" takes its value from valueFrom, which adopt cannot read")
			return "", false
		}
		// cmp-server reads an empty value as unset.
		return e.Value, e.Value != ""
	}
	var rc catalog.RenderCache
	var size int64
	if v, ok := value(keys.EnvRenderCacheSize); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			bad = append(bad, fmt.Sprintf("%s=%q is not a number of bytes", keys.EnvRenderCacheSize, v))
		}
		size = n
	}
	if v, ok := value(keys.EnvRenderCacheTTL); ok {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			bad = append(bad, fmt.Sprintf("%s=%q is not a positive duration such as 10m", keys.EnvRenderCacheTTL, v))
		}
		rc.TTL = &metav1.Duration{Duration: d}
	}
	for _, b := range []struct {
		name string
		to   *bool
	}{{keys.EnvRenderCacheRevisionIndependent, &rc.RevisionIndependent}, {keys.EnvRenderCacheAllowSecrets, &rc.AllowSecrets}} {
		if v, ok := value(b.name); ok {
			x, err := strconv.ParseBool(v)
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s=%q is not true or false", b.name, v))
			}
			*b.to = x
		}
	}
	if len(named) == 0 {
		return
	}
	vars := strings.Join(named, ", ")
	switch {
	case len(bad) > 0:
		a.f.add(Warning, CodeRenderCache, pc.id(), pc.name,
			"container "+pc.c.Name+" sets "+strings.Join(bad, "; ")+": plugins."+pc.name+" gets no renderCache, and "+vars+" are not copied into its env",
			"if the plugin is deterministic, set plugins."+pc.name+".renderCache (size such as 64Mi, ttl, revisionIndependent, allowSecrets) in catalog.yaml")
	case size == 0:
		a.f.add(Info, CodeRenderCache, pc.id(), pc.name,
			"container "+pc.c.Name+" sets "+vars+" but no "+keys.EnvRenderCacheSize+" above 0, so its render cache was off: plugins."+pc.name+" gets no renderCache, and the variables are dropped",
			"")
	default:
		rc.Size = renderCacheSize(size)
		pc.p.RenderCache = &rc
		if pc.ours == "" {
			a.f.add(Info, CodeRenderCache, pc.id(), pc.name,
				"container "+pc.c.Name+"'s "+vars+" become plugins."+pc.name+".renderCache, from which the injector sets them",
				"")
		}
	}
}

// renderCacheSize is n bytes as the admin likely wrote it: the injector
// writes renderCache.size as plain bytes, so 64Mi comes back as 67108864,
// and a power-of-1024 suffix reads better where it is exact.
func renderCacheSize(n int64) resource.Quantity {
	if n%1024 == 0 {
		return *resource.NewQuantity(n, resource.BinarySI)
	}
	return *resource.NewQuantity(n, resource.DecimalSI)
}
