package tenancy

import (
	"strings"
	"testing"
)

// TestDenyPatternsCannotBeBypassed is issue 37's item 10: a repository URL
// that git (and the Git server) resolves to a denied repository is refused
// by the deny pattern, however it is spelled, and one that resolves outside
// an allow pattern is not allowed by it; the usual spellings of an allowed
// repository are still allowed.
func TestDenyPatternsCannotBeBypassed(t *testing.T) {
	rules := Rules{AllowedSourceRepos: []string{
		"https://github.com/org/**", "git@github.com:org/**",
		"!https://github.com/org/secret", "!https://github.com/org/team-a-sandbox", "!git@github.com:org/secret",
	}}
	denied := []string{
		"https://github.com/org/secret",
		"https://github.com/org/secret/",
		"https://github.com/org/secret.git/",
		"https://github.com/org/secret//",
		"https://github.com/org/./secret",
		"https://github.com/org/x/../secret",
		"https://github.com/org/%73ecret",
		"https://github.com/org/%2e%2e/org/secret",
		"https://github.com/org/x%2F..%2Fsecret",
		"https://github.com/org/team-a-sandbox?x=1",
		"https://github.com/org/secret#main",
		"https://github.com/org//secret",
		"HTTPS://GITHUB.COM/ORG/SECRET",
		"https://github.com:443/org/secret",
		"https://github.com./org/secret",
		"https://x-access-token:t0ken@github.com/org/secret",
		"https://github.com/org/secret.git",
		"git@github.com:org/secret.git",
		"git@github.com:org/secret/",
		"git@github.com:org/x/../secret",
		"ssh://git@github.com/org/secret",
		"ssh://git@github.com:22/org/secret.git",
		"git+ssh://git@github.com/org/secret",
	}
	for _, u := range denied {
		d := Decide(rules, Request{Call: Generate, Repos: []string{u}})
		if d.Allowed() || d.Reason != RepoNotAllowed || d.Deny == "" {
			t.Errorf("%q: %s (deny %q), want refused by a deny pattern", u, d.Reason, d.Deny)
		}
	}
	outside := []string{
		"https://github.com/org/apps/../../other/apps",
		"https://github.com/org/%2e%2e/other",
		"https://github.com/org/apps%2F..%2F..%2Fother%2Fapps",
		"https://github.com.evil.example/org/apps",
	}
	for _, u := range outside {
		if d := Decide(rules, Request{Call: Generate, Repos: []string{u}}); d.Allowed() {
			t.Errorf("%q allowed, want refused: it is not under github.com/org", u)
		}
	}
	allowed := []string{
		"https://github.com/org/apps",
		"https://github.com/Org/Apps.git",
		"https://github.com/org/apps/",
		"https://github.com:443/org/apps",
		"https://github.com/org/secret-not",
		"https://github.com/org/secrets",
		"git@github.com:org/apps.git",
		"ssh://git@github.com/org/apps",
		"ssh://git@github.com:22/org/apps",
	}
	for _, u := range allowed {
		if d := Decide(rules, Request{Call: Generate, Repos: []string{u}}); !d.Allowed() {
			t.Errorf("%q refused (%s, deny %q), want allowed", u, d.Reason, d.Deny)
		}
	}
}

// FuzzNormalizeRepoURL: whatever the URL, its canonical spelling has no "."
// or ".." segment, no empty segment and no trailing slash, and no
// query, so no spelling of a denied repository slips past a deny pattern by
// one of those. Seeds: testdata/fuzz.
func FuzzNormalizeRepoURL(f *testing.F) {
	for _, seed := range []string{"https://github.com/org/x/../secret", "git@github.com:org/./secret.git/", "https://h/%2e%2e/%2e/x?y#z", "ssh://u:p@h:22/a//b/", "/a/../../b", "c:/x"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, u string) {
		n := normalizeRepoURL(u)
		if n == "" {
			return
		}
		_, p, _ := strings.Cut(strings.TrimPrefix(n, "file://"), "/")
		if i := strings.Index(n, "://"); i >= 0 {
			_, p, _ = strings.Cut(n[i+3:], "/")
		}
		for _, seg := range strings.Split(p, "/") {
			if p != "" && (seg == "." || seg == ".." || seg == "") {
				t.Fatalf("normalizeRepoURL(%q) = %q keeps segment %q", u, n, seg)
			}
		}
		if strings.HasSuffix(n, "/") && !strings.HasSuffix(n, "://") {
			t.Fatalf("normalizeRepoURL(%q) = %q keeps a suffix", u, n)
		}
	})
}
