package catalog

import (
	"strings"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
)

// tenantCatalog is a valid catalog whose plugin "vault" has the given
// fields and config.
func tenantCatalog(fields, config string) string {
	return "apiVersion: cmp-injector.io/v1alpha1\nkind: PluginCatalog\ndefaults: {copyImage: ghcr.io/x/cmp-server:1}\nplugins:\n" +
		"  vault:\n    image: example.com/avp:1\n" + fields + "    config: " + config + "\n"
}

const inlineVault = `{inline: {apiVersion: argoproj.io/v1alpha1, kind: ConfigManagementPlugin, metadata: {name: vault}, spec: {generate: {command: [avp, generate, .]}}}}`

// Each bad rule is refused with a message naming the plugin, the field and
// what is wrong.
func TestTenancyFieldProblems(t *testing.T) {
	for _, tc := range []struct {
		name, fields, config string
		want                 []string
	}{
		{"empty projects", "    allowedProjects: []\n", inlineVault,
			[]string{"plugins.vault.allowedProjects: is empty, which would allow no one; leave it out to allow everyone"}},
		{"bad project name", "    allowedProjects: [Team_A]\n", inlineVault,
			[]string{`plugins.vault.allowedProjects[0]: "Team_A" cannot be an Argo CD project's name`}},
		{"bad repo glob", "    allowedSourceRepos: ['https://github.com/org/[a']\n", inlineVault,
			[]string{`plugins.vault.allowedSourceRepos[0]: "https://github.com/org/[a" is not a valid glob: unclosed '['`}},
		{"deny only", "    allowedSourceRepos: ['!https://github.com/org/x']\n", inlineVault,
			[]string{`plugins.vault.allowedSourceRepos: has only deny patterns`}},
		{"duplicate", "    allowedProjects: [a, b, a]\n", inlineVault,
			[]string{`plugins.vault.allowedProjects[2]: "a" is listed twice`}},
		{"configMap config", "    allowedProjects: [team-a]\n", "{configMap: {name: avp}}",
			[]string{"plugins.vault.allowedProjects: needs config.inline", "write spec.allowedProjects in that plugin.yaml instead"}},
		{"image config", "    allowedSourceRepos: ['*']\n", "{fromImage: true}",
			[]string{"plugins.vault.allowedSourceRepos: needs config.inline"}},
		{"rules inside the inline config", "",
			`{inline: {kind: ConfigManagementPlugin, metadata: {name: vault}, spec: {allowedProjects: [a], generate: {command: [avp]}}}}`,
			[]string{"plugins.vault.config.inline: sets spec.allowedProjects: write it on the catalog entry (plugins.vault.allowedProjects), not inside the inline config"}},
		{"repository rules inside the inline config", "",
			`{inline: {kind: ConfigManagementPlugin, metadata: {name: vault}, spec: {allowedSourceRepos: ['*'], generate: {command: [avp]}}}}`,
			[]string{"plugins.vault.config.inline: sets spec.allowedSourceRepos: write it on the catalog entry (plugins.vault.allowedSourceRepos)"}},
		{"bad rule inside the inline config", "",
			`{inline: {kind: ConfigManagementPlugin, metadata: {name: vault}, spec: {allowedProjects: [], generate: {command: [avp]}}}}`,
			[]string{"plugins.vault.config.inline: invalid plugin configuration: spec.allowedProjects: is empty"}},
		{"misspelt field", "    allowedProject: [a]\n", inlineVault,
			[]string{`unknown field "plugins.vault.allowedProject"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tenantCatalog(tc.fields, tc.config)))
			if err == nil {
				t.Fatalf("accepted; want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message\n  %s\nlacks\n  %s", err, w)
				}
			}
		})
	}
}

// The rules reach the sidecar in the inline plugin.yaml, which the plugin
// server reads back with the same rules; a plugin without rules keeps the
// exact bytes it had before rules existed.
func TestTenancyTravelsInTheInlineConfig(t *testing.T) {
	c, err := Parse([]byte(tenantCatalog("    allowedProjects: [team-a, 'platform-*']\n    allowedSourceRepos: ['https://github.com/org/**']\n", inlineVault)))
	if err != nil {
		t.Fatal(err)
	}
	e := c.Plugins["vault"]
	if got := strings.Join(e.AllowedProjects, ","); got != "team-a,platform-*" {
		t.Errorf("AllowedProjects = %q", got)
	}
	p, warnings, err := pluginconfig.Decode([]byte(e.InlineYAML))
	if err != nil || len(warnings) > 0 {
		t.Fatalf("the sidecar would not read\n%s\n%v %v", e.InlineYAML, err, warnings)
	}
	if strings.Join(p.Spec.AllowedProjects, ",") != "team-a,platform-*" || strings.Join(p.Spec.AllowedSourceRepos, ",") != "https://github.com/org/**" {
		t.Errorf("plugin.yaml carries %+v\n%s", p.Spec.Rules, e.InlineYAML)
	}
	if strings.Join(e.Parsed.Spec.AllowedProjects, ",") != "team-a,platform-*" {
		t.Errorf("Parsed carries %+v", e.Parsed.Spec.Rules)
	}

	plain, err := Parse([]byte(tenantCatalog("", inlineVault)))
	if err != nil {
		t.Fatal(err)
	}
	want := "apiVersion: argoproj.io/v1alpha1\nkind: ConfigManagementPlugin\nmetadata:\n  name: vault\nspec:\n  generate:\n    command:\n    - avp\n    - generate\n    - .\n"
	if got := plain.Plugins["vault"].InlineYAML; got != want {
		t.Errorf("a plugin without rules renders\n%s\nwant\n%s", got, want)
	}
}
