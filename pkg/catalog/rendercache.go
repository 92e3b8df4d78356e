package catalog

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// RenderCache turns on cmp-server's render cache in a plugin's sidecar: a
// GenerateManifest that repeats one already answered (the same tree, app
// path, env and parameters, the same plugin.yaml) is answered from memory
// without running the plugin. It is the admin's statement that the plugin is
// deterministic: its output depends on nothing but those (no chart
// repository, Vault, git remote or clock). The injector sets it as the
// sidecar's CMP_SERVER_RENDER_CACHE_* env.
type RenderCache struct {
	// Size bounds the answers kept in the sidecar's memory (counted against
	// its memory limit), e.g. 64Mi.
	Size resource.Quantity `json:"size"`
	// TTL is how long an answer may be given (default 10m): what bounds a
	// change the key cannot see.
	TTL *metav1.Duration `json:"ttl,omitempty"`
	// RevisionIndependent leaves ARGOCD_APP_REVISION and its short forms out
	// of the key, so that a commit that changes nothing the plugin is sent
	// still hits. Only for plugins that never print the revision.
	RevisionIndependent bool `json:"revisionIndependent,omitempty"`
	// AllowSecrets keeps the cache on for an entry that reads Secrets (env
	// from a Secret, a Secret or token volume): a rotated Secret then reaches
	// the output only when the answer expires, and answers holding its
	// values stay in the sidecar's memory. Refused without it.
	AllowSecrets bool `json:"allowSecrets,omitempty"`
}

// renderCacheEnvNames are the variables the injector sets from renderCache;
// the catalog's env must not set them.
var renderCacheEnvNames = []string{keys.EnvRenderCacheSize, keys.EnvRenderCacheTTL, keys.EnvRenderCacheRevisionIndependent, keys.EnvRenderCacheAllowSecrets}

func validateRenderCache(p *problems, field string, pl *Plugin) {
	for i, e := range pl.Env {
		if slices.Contains(renderCacheEnvNames, e.Name) {
			p.addf(fmt.Sprintf("%s.env[%d].name", field, i), "%s is set by the injector from renderCache; use renderCache instead", e.Name)
		}
	}
	rc := pl.RenderCache
	if rc == nil {
		return
	}
	f := field + ".renderCache"
	if rc.Size.Sign() <= 0 {
		p.addf(f+".size", "must be a positive size such as 64Mi (got %s)", rc.Size.String())
	}
	if rc.TTL != nil && rc.TTL.Duration <= 0 {
		p.addf(f+".ttl", "must be a positive duration such as 10m (got %s)", rc.TTL.Duration)
	}
	if pl.GitCredentials {
		p.addf(f, "cannot be set with gitCredentials: a plugin that fetches with the repo-server's git credentials reads more than the repository it is sent, and each of its requests carries a fresh askpass nonce")
	}
	if reads := secretInputs(pl); len(reads) > 0 && !rc.AllowSecrets {
		p.addf(f, "the entry reads Secrets (%s): a cached answer would outlive a rotated Secret and keep its values in memory; set renderCache.allowSecrets: true if that is acceptable", strings.Join(reads, ", "))
	}
}

// secretInputs names what of pl's sidecar reads a Secret or a token.
func secretInputs(pl *Plugin) []string {
	var out []string
	for _, e := range pl.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			out = append(out, "env "+e.Name)
		}
	}
	for _, ef := range pl.EnvFrom {
		if ef.SecretRef != nil {
			out = append(out, "envFrom Secret "+ef.SecretRef.Name)
		}
	}
	for _, v := range pl.Volumes {
		switch {
		case v.Secret != nil:
			out = append(out, "volume "+v.Name)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.Secret != nil || s.ServiceAccountToken != nil {
					out = append(out, "volume "+v.Name)
					break
				}
			}
		}
	}
	return out
}
