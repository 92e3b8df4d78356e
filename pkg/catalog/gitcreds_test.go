package catalog

import (
	"strings"
	"testing"
)

const inlineGitCreds = `{inline: {apiVersion: argoproj.io/v1alpha1, kind: ConfigManagementPlugin, metadata: {name: vault}, spec: {provideGitCreds: true, generate: {command: [avp, generate, .]}}}}`

// provideGitCreds hands a plugin the credentials of every repository the
// repo-server clones for it: the catalog refuses it without the entry's
// consent, and says what to add.
func TestGitCredentialsNeedConsent(t *testing.T) {
	_, err := Parse([]byte(tenantCatalog("", inlineGitCreds)))
	want := "plugins.vault.config.inline: sets spec.provideGitCreds: true, which gives the plugin the git credentials of every repository the repo-server clones for it; add gitCredentials: true to plugins.vault to allow it"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want %q", err, want)
	}
	c, err := Parse([]byte(tenantCatalog("    gitCredentials: true\n", inlineGitCreds)))
	if err != nil {
		t.Fatal(err)
	}
	if e := c.Plugins["vault"]; !e.GitCredentials || !e.Parsed.Spec.ProvideGitCreds {
		t.Errorf("entry %+v", e.Plugin)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("warnings: %v", c.Warnings)
	}
	// Consent to what the config does not ask for is harmless but likely a
	// mistake.
	c, err = Parse([]byte(tenantCatalog("    gitCredentials: true\n", inlineVault)))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "plugins.vault.gitCredentials is true, but its config does not set spec.provideGitCreds") {
		t.Errorf("warnings: %v", c.Warnings)
	}
	// A configMap or image config cannot be read here: the consent alone
	// decides what the sidecar shares.
	if _, err := Parse([]byte(tenantCatalog("    gitCredentials: true\n", "{configMap: {name: avp}}"))); err != nil {
		t.Error(err)
	}
}
