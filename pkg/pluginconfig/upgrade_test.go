package pluginconfig

import (
	"strings"
	"testing"
)

// The rule of argo-cd PR #28362 (Argo CD 4.0's ValidatePluginConfig): a
// plugin.yaml that sets spec.version is refused.
func refusedByArgo4(p *Plugin) bool { return p.Spec.Version != "" }

// A plugin.yaml with spec.version gets the notice, and the rewrite it gives
// passes Argo CD 4.0's rule while keeping the socket every released Argo CD
// dials for it; one without gets none.
func TestVersionNotice(t *testing.T) {
	const base = "apiVersion: argoproj.io/v1alpha1\nkind: ConfigManagementPlugin\nmetadata: {name: helm}\nspec:\n  generate: {command: [helm, template, .]}\n"
	for _, tc := range []struct {
		name, yaml string
		notice     bool
	}{
		{"no version", base, false},
		{"version", base + "  version: v1.0\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _, err := Decode([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			n := p.VersionNotice()
			if (n != "") != tc.notice || refusedByArgo4(p) != tc.notice {
				t.Fatalf("notice %q for a plugin Argo CD 4.0 refuses: %v", n, refusedByArgo4(p))
			}
			q := p.WithoutVersion()
			if refusedByArgo4(q) || q.SocketName() != p.SocketName() || q.Validate() != nil {
				t.Errorf("rewrite %s (%s, version %q): Argo CD 4.0 refuses it or its socket moved from %s", q.Metadata.Name, q.SocketName(), q.Spec.Version, p.SocketName())
			}
			if tc.notice && (!strings.Contains(n, "metadata.name: helm-v1.0") || !strings.Contains(n, "helm-v1.0.sock")) {
				t.Errorf("notice %q does not give the rewrite", n)
			}
			if p.Spec.Version != "" && p.Metadata.Name != "helm" {
				t.Error("WithoutVersion changed the plugin it was given")
			}
		})
	}
}
