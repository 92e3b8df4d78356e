package catalog

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestImageAllowed(t *testing.T) {
	for _, tc := range []struct {
		ref      string
		patterns []string
		allowed  bool
		invalid  bool
	}{
		{"alpine/helm:3.16.2", []string{"alpine/helm:*"}, true, false},
		{"docker.io/alpine/helm:3", []string{"alpine/helm:*"}, true, false},
		{"quay.io/argoproj/argocd:v3.1.8", []string{"quay.io/argoproj/argocd:*"}, true, false},
		{"alpine/helm:3", []string{"alpine/*:*"}, true, false},
		{"alpine/helm/evil:3", []string{"alpine/*:*"}, false, false},
		{"alpine/helm", []string{"alpine/helm:*"}, false, false},
		{"alpine/helm", []string{"alpine/helm"}, true, false},
		{"alpine/helm:3", []string{"alpine/helm"}, false, false},
		{"alpine/helm@" + digest, []string{"alpine/helm:*"}, false, false},
		{"alpine/helm@" + digest, []string{"alpine/helm@sha256:*"}, true, false},
		{"alpine/helm:3@" + digest, []string{"alpine/helm:*"}, true, false},
		{"evil/helm:3", []string{"alpine/helm:*"}, false, false},
		// What the attack run got admitted, and its relatives.
		{"alpine/helm:3\nevil", []string{"alpine/helm:*"}, false, true},
		{"alpine/helm:", []string{"alpine/helm:*"}, false, true},
		{"alpine/helm:\xff", []string{"alpine/helm:*"}, false, true},
		{"alpine/Helm:3", []string{"alpine/*:*"}, false, true},
		{" alpine/helm:3", []string{"*:*"}, false, true},
		{"", []string{"*"}, false, true},
	} {
		ok, err := ImageAllowed(tc.ref, tc.patterns)
		if ok != tc.allowed || (err != nil) != tc.invalid {
			t.Errorf("ImageAllowed(%q, %q) = %v, %v; want allowed %v, invalid %v", tc.ref, tc.patterns, ok, err, tc.allowed, tc.invalid)
		}
	}
}

func TestImagePatternsAreValidated(t *testing.T) {
	for _, p := range []string{"", "alpine/helm:", "[", "alpine/helm:[", "@sha256:*", ":3"} {
		if _, err := parseImagePattern(p); err == nil {
			t.Errorf("pattern %q accepted", p)
		}
	}
	_, err := Parse([]byte(`apiVersion: cmp-injector.io/v1alpha1
kind: PluginCatalog
defaults: {copyImage: "cmp-server:"}
plugins:
  helm:
    image: "alpine/helm:3\nx"
    allowedImages: ["alpine/helm:"]
    config: {inline: {kind: ConfigManagementPlugin, metadata: {name: helm}, spec: {generate: {command: [helm]}}}}
`))
	if err == nil {
		t.Fatal("catalog with bad images accepted")
	}
	for _, want := range []string{"defaults.copyImage", "plugins.helm.image", "plugins.helm.allowedImages[0]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s: %v", want, err)
		}
	}
}

// FuzzImageAllowed: whatever the input, an allowed reference is one a runtime
// would accept: valid UTF-8, no space or control character, a non-empty tag or
// a digest when the pattern names one.
func FuzzImageAllowed(f *testing.F) {
	for _, s := range []string{"alpine/helm:3", "alpine/helm:3\nevil", "alpine/helm:", "alpine/helm:\xff", "a@" + digest} {
		f.Add(s, "alpine/helm:*")
	}
	f.Fuzz(func(t *testing.T, ref, pattern string) {
		ok, err := ImageAllowed(ref, []string{pattern})
		if !ok {
			return
		}
		if err != nil || !utf8.ValidString(ref) || strings.IndexFunc(ref, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
			t.Fatalf("%q allowed by %q (err %v)", ref, pattern, err)
		}
		img, err := parseImage(ref)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(pattern, ":") && img.Tag == "" && img.Digest == "" {
			t.Fatalf("%q without tag allowed by %q", ref, pattern)
		}
	})
}
