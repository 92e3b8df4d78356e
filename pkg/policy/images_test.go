package policy

import (
	"regexp"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
)

// policyAllows is the policy's decision on an image override: a valid
// reference that one pattern's regexp matches.
func policyAllows(ref string, patterns []string) bool {
	if !regexp.MustCompile(referencePattern).MatchString(ref) {
		return false
	}
	for _, p := range patterns {
		if regexp.MustCompile(imageRegexp(p)).MatchString(ref) {
			return true
		}
	}
	return false
}

var imageCases = []struct {
	pattern string
	ref     string
	// policy is what the policy decides; the webhook must allow whatever
	// the policy allows.
	policy bool
}{
	{"alpine/helm:*", "alpine/helm:3.19.0", true},
	{"alpine/helm:*", "docker.io/alpine/helm:3.19.0", true},
	{"alpine/helm:*", "index.docker.io/alpine/helm:3.19.0", true},
	{"alpine/helm:*", "alpine/helm", false},
	{"alpine/helm:*", "alpine/helm:3@sha256:" + hex64, true},
	{"alpine/helm:*", "alpine/helmfile:1", false},
	{"alpine/helm:*", "evil.example.com/alpine/helm:1", false},
	{"alpine:3.*", "alpine:3.20", true},
	{"alpine:3.*", "library/alpine:3.20", true},
	{"alpine:3.*", "docker.io/library/alpine:3.20", true},
	{"alpine:3.*", "alpine:4", false},
	{"alpine", "alpine", true},
	{"alpine", "alpine:3", false},
	{"ghcr.io/org/*:v*", "ghcr.io/org/cmp:v1.2", true},
	{"ghcr.io/org/*:v*", "ghcr.io/org/a/b:v1", false},
	{"ghcr.io/org/*:v*", "ghcr.io/org/cmp:1.2", false},
	{"ghcr.io/org/cmp@sha256:*", "ghcr.io/org/cmp@sha256:" + hex64, true},
	{"ghcr.io/org/cmp@sha256:*", "ghcr.io/org/cmp:v1@sha256:" + hex64, true},
	{"ghcr.io/org/cmp@sha256:*", "ghcr.io/org/cmp:v1", false},
	{"localhost:5000/cmp:*", "localhost:5000/cmp:dev", true},
	{"registry.example.com:5000/team/*:*", "registry.example.com:5000/team/x:1", true},
	// A tag pattern never reaches into the digest: the webhook checks the
	// tag alone.
	{"ghcr.io/org/cmp:*abc", "ghcr.io/org/cmp:1@sha256:" + hex64[:61] + "abc", false},
	// A name pattern never reaches into the tag.
	{"ghcr.io/org/cmp*", "ghcr.io/org/cmp:1", false},
	// What the webhook normalises but the policy takes only as written.
	{"*/helm:*", "docker.io/alpine/helm:1", false},
	// Not references at all.
	{"alpine/helm:*", "alpine/helm:3\n", false},
	{"alpine/helm:*", "Alpine/helm:3", false},
	{"alpine/helm:*", "alpine/helm:", false},
}

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestImageRegexp(t *testing.T) {
	for _, c := range imageCases {
		got := policyAllows(c.ref, []string{c.pattern})
		if got != c.policy {
			t.Errorf("pattern %q, image %q: policy allows = %v, want %v (regexp %s)", c.pattern, c.ref, got, c.policy, imageRegexp(c.pattern))
		}
		webhook, _ := catalog.ImageAllowed(c.ref, []string{c.pattern})
		if got && !webhook {
			t.Errorf("pattern %q, image %q: the policy allows what the webhook refuses", c.pattern, c.ref)
		}
	}
}

// FuzzImageRegexpNeverWiderThanWebhook: whatever pattern and image, the
// policy never allows an image the webhook's allowedImages check refuses.
func FuzzImageRegexpNeverWiderThanWebhook(f *testing.F) {
	for _, c := range imageCases {
		f.Add(c.pattern, c.ref)
	}
	f.Fuzz(func(t *testing.T, pattern, ref string) {
		if _, err := catalog.ImageAllowed("alpine", []string{pattern}); err != nil {
			return // the catalog refuses the pattern at load
		}
		if _, err := regexp.Compile(imageRegexp(pattern)); err != nil {
			t.Fatalf("pattern %q: regexp %q: %v", pattern, imageRegexp(pattern), err)
		}
		if policyAllows(ref, []string{pattern}) {
			if ok, err := catalog.ImageAllowed(ref, []string{pattern}); !ok {
				t.Fatalf("pattern %q, image %q: the policy allows it, the webhook refuses it (%v)", pattern, ref, err)
			}
		}
	})
}
