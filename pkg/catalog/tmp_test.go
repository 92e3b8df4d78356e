package catalog

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// tmpCatalog is a catalog of two plugins whose /tmp settings the cases fill in.
func tmpCatalog(defaults, a, b string) string {
	return `apiVersion: cmp-injector.io/v1alpha1
kind: PluginCatalog
defaults:
  copyImage: cmp-server:1
` + defaults + `
plugins:
  a:
    image: a:1
    config: {inline: {kind: ConfigManagementPlugin, metadata: {name: a}, spec: {generate: {command: [a]}}}}
` + a + `
  b:
    image: b:1
    config: {inline: {kind: ConfigManagementPlugin, metadata: {name: b}, spec: {generate: {command: [b]}}}}
` + b
}

func TestTmpMedium(t *testing.T) {
	for _, tc := range []struct {
		name        string
		defaults    string
		a, b        string
		want        map[string]corev1.StorageMedium // plugin → medium, when valid
		problems    []string                        // each must be in the error
		notProblems []string
	}{
		{name: "unset: disk, as before",
			want: map[string]corev1.StorageMedium{"a": "", "b": ""}},
		{name: "one plugin in memory, bounded by the default size",
			defaults: "  tmpSizeLimit: 512Mi", a: "    tmpMedium: Memory",
			want: map[string]corev1.StorageMedium{"a": corev1.StorageMediumMemory, "b": ""}},
		{name: "memory by default, one plugin back on disk without a size",
			defaults: "  tmpMedium: Memory", a: "    tmpMedium: Disk", b: "    tmpSizeLimit: 1Gi",
			want: map[string]corev1.StorageMedium{"a": "", "b": corev1.StorageMediumMemory}},
		{name: "below the memory limit",
			a:    "    tmpMedium: Memory\n    tmpSizeLimit: 256Mi\n    resources: {limits: {memory: 512Mi}}",
			want: map[string]corev1.StorageMedium{"a": corev1.StorageMediumMemory, "b": ""}},
		{name: "unknown media",
			defaults: "  tmpMedium: tmpfs", a: "    tmpMedium: HugePages",
			problems: []string{`defaults.tmpMedium: must be Disk (the node's disk, the default) or Memory`, `(got "tmpfs")`,
				`plugins.a.tmpMedium: must be Disk`, `(got "HugePages")`}},
		{name: "memory without a size limit",
			defaults: "  tmpMedium: Memory", a: "    tmpSizeLimit: 1Gi",
			problems:    []string{"plugins.b: /tmp in Memory (defaults.tmpMedium) needs a tmpSizeLimit, the plugin's or the default's", "OOM kill"},
			notProblems: []string{"plugins.a:"}},
		{name: "the plugin's memory medium without a size limit",
			a:        "    tmpMedium: Memory",
			problems: []string{"plugins.a: /tmp in Memory (plugins.a.tmpMedium) needs a tmpSizeLimit"}},
		{name: "size limit at the plugin's memory limit",
			a:        "    tmpMedium: Memory\n    tmpSizeLimit: 512Mi\n    resources: {limits: {memory: 512Mi}}",
			problems: []string{"plugins.a: /tmp in Memory (plugins.a.tmpMedium) may hold 512Mi (plugins.a.tmpSizeLimit), not below the sidecar's memory limit 512Mi (plugins.a.resources)"}},
		{name: "default size limit above the default memory limit",
			defaults: "  tmpMedium: Memory\n  tmpSizeLimit: 2Gi\n  resources: {limits: {memory: 1Gi}}", b: "    tmpMedium: Disk",
			problems:    []string{"plugins.a: /tmp in Memory (defaults.tmpMedium) may hold 2Gi (defaults.tmpSizeLimit), not below the sidecar's memory limit 1Gi (defaults.resources)"},
			notProblems: []string{"plugins.b:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tmpCatalog(tc.defaults, tc.a, tc.b)))
			if len(tc.problems) > 0 {
				if err == nil {
					t.Fatalf("accepted, want %q", tc.problems)
				}
				for _, p := range tc.problems {
					if !strings.Contains(err.Error(), p) {
						t.Errorf("error lacks %q:\n%v", p, err)
					}
				}
				for _, p := range tc.notProblems {
					if strings.Contains(err.Error(), p) {
						t.Errorf("error has %q:\n%v", p, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range tc.want {
				if got := c.TmpMediumFor(c.Plugins[name]); got != want {
					t.Errorf("plugin %s: medium %q, want %q", name, got, want)
				}
			}
		})
	}
}
