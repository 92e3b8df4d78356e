package catalog

import (
	"strings"
	"testing"
	"time"
)

// The render cache is the admin's statement that a plugin is deterministic:
// refused where the entry visibly is not (git credentials) and, unless
// allowed, where it reads Secrets; each refusal names the field and why.
func TestRenderCacheProblems(t *testing.T) {
	for _, tc := range []struct {
		name, fields, config string
		want                 []string
	}{
		{"no size", "    renderCache: {ttl: 5m}\n", inlineVault,
			[]string{"plugins.vault.renderCache.size: must be a positive size such as 64Mi (got 0)"}},
		{"negative ttl", "    renderCache: {size: 1Mi, ttl: -5m}\n", inlineVault,
			[]string{"plugins.vault.renderCache.ttl: must be a positive duration"}},
		{"git credentials", "    gitCredentials: true\n    renderCache: {size: 1Mi}\n", inlineGitCreds,
			[]string{"plugins.vault.renderCache: cannot be set with gitCredentials"}},
		{"secret env", "    env: [{name: TOKEN, valueFrom: {secretKeyRef: {name: vault, key: token}}}]\n    renderCache: {size: 1Mi}\n", inlineVault,
			[]string{"plugins.vault.renderCache: the entry reads Secrets (env TOKEN)", "set renderCache.allowSecrets: true"}},
		{"secret envFrom and a token volume", "    envFrom: [{secretRef: {name: vault}}]\n" +
			"    volumes: [{name: token, mountPath: /var/run/vault, projected: {sources: [{serviceAccountToken: {audience: vault, path: token}}]}}]\n" +
			"    renderCache: {size: 1Mi}\n", inlineVault,
			[]string{"(envFrom Secret vault, volume token)"}},
		{"the injector's variable", "    env: [{name: CMP_SERVER_RENDER_CACHE_SIZE, value: '1'}]\n", inlineVault,
			[]string{"plugins.vault.env[0].name: CMP_SERVER_RENDER_CACHE_SIZE is set by the injector from renderCache"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tenantCatalog(tc.fields, tc.config)))
			if err == nil {
				t.Fatalf("accepted; want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	c, err := Parse([]byte(tenantCatalog("    envFrom: [{secretRef: {name: vault}}]\n    renderCache: {size: 64Mi, ttl: 30m, revisionIndependent: true, allowSecrets: true}\n", inlineVault)))
	if err != nil {
		t.Fatal(err)
	}
	rc := c.Plugins["vault"].RenderCache
	if rc.Size.Value() != 64<<20 || rc.TTL.Duration != 30*time.Minute || !rc.RevisionIndependent || !rc.AllowSecrets {
		t.Errorf("renderCache %+v", rc)
	}
}
