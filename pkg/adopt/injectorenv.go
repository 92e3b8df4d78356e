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

// takeInjectorEnv moves catalog.InjectorEnv out of pc.p.Env (the catalog
// refuses them in env): the secret-env list is dropped, since the injector
// derives it from the entry's Secret inputs, and the render cache's
// variables become pc.p.RenderCache, as pkg/inject's renderCacheEnv writes
// them (size in bytes, the TTL as a Go duration, the flags as "true"); one
// that does not parse is reported and left out.
func (a *adopter) takeInjectorEnv(pc *pluginCtx) {
	var rc catalog.RenderCache
	set, sized, sizeSeen := false, false, false
	var bad []string
	for _, e := range pc.p.Env {
		if !slices.Contains(catalog.InjectorEnv, e.Name) || e.Name == keys.EnvSecretEnv {
			continue
		}
		if e.ValueFrom != nil {
			bad = append(bad, e.Name+" (from "+valueSource(e.ValueFrom)+")")
			continue
		}
		set = true
		switch e.Name {
		case keys.EnvRenderCacheSize:
			sizeSeen = true
			q, err := resource.ParseQuantity(e.Value)
			if err != nil || q.Sign() <= 0 {
				bad = append(bad, fmt.Sprintf("%s=%q (want a positive size)", e.Name, e.Value))
				continue
			}
			// The injector writes bytes; a binary size reads as the admin wrote it.
			rc.Size, sized = *resource.NewQuantity(q.Value(), resource.BinarySI), true
		case keys.EnvRenderCacheTTL:
			d, err := time.ParseDuration(e.Value)
			if err != nil || d <= 0 {
				bad = append(bad, fmt.Sprintf("%s=%q (want a positive duration)", e.Name, e.Value))
				continue
			}
			rc.TTL = &metav1.Duration{Duration: d}
		case keys.EnvRenderCacheRevisionIndependent, keys.EnvRenderCacheAllowSecrets:
			on, err := strconv.ParseBool(e.Value)
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s=%q (want true or false)", e.Name, e.Value))
				continue
			}
			if e.Name == keys.EnvRenderCacheRevisionIndependent {
				rc.RevisionIndependent = on
			} else {
				rc.AllowSecrets = on
			}
		}
	}
	pc.p.Env = slices.DeleteFunc(pc.p.Env, func(e corev1.EnvVar) bool { return slices.Contains(catalog.InjectorEnv, e.Name) })
	switch {
	case sized:
		pc.p.RenderCache = &rc
	case set && !sizeSeen:
		bad = append(bad, keys.EnvRenderCacheSize+" is missing, without which the server keeps no cache")
	}
	if len(bad) > 0 {
		a.f.add(Warning, CodeInjectorEnv, pc.id(), pc.name,
			fmt.Sprintf("container %s's render cache settings were not carried over: %s", pc.c.Name, strings.Join(bad, "; ")),
			"set plugins."+pc.name+".renderCache (size, ttl, revisionIndependent, allowSecrets) if the plugin should keep its render cache (docs/catalog.md, Render cache)")
	}
}

// valueSource names where a valueFrom reads.
func valueSource(v *corev1.EnvVarSource) string {
	switch {
	case v.ConfigMapKeyRef != nil:
		return "ConfigMap " + v.ConfigMapKeyRef.Name
	case v.SecretKeyRef != nil:
		return "Secret " + v.SecretKeyRef.Name
	case v.FieldRef != nil:
		return "field " + v.FieldRef.FieldPath
	}
	return "a reference"
}
