package tenancy

import (
	"strings"
	"testing"
)

func TestGlobFollowsArgoCDSourceRepos(t *testing.T) {
	cases := []struct {
		pat, text string
		want      bool
	}{
		{"*", "https://github.com/org/repo", true},
		{"https://github.com/org/*", "https://github.com/org/repo", true},
		{"https://github.com/org/*", "https://github.com/org/sub/repo", false},
		{"https://github.com/org/**", "https://github.com/org/sub/repo", true},
		{"https://github.com/org/team-?", "https://github.com/org/team-a", true},
		{"https://github.com/org/team-?", "https://github.com/org/team-ab", false},
		{"https://github.com/org/team-[ab]", "https://github.com/org/team-b", true},
		{"https://github.com/org/team-[!ab]", "https://github.com/org/team-b", false},
		{"https://github.com/org/team-[a-c]x", "https://github.com/org/team-cx", true},
		{"https://github.com/org/{alpha,beta}", "https://github.com/org/beta", true},
		{"https://github.com/org/{alpha,b{e,u}ta}", "https://github.com/org/buta", true},
		{"https://github.com/org/{alpha,beta}", "https://github.com/org/gamma", false},
		{`https://github.com/org/a\*b`, "https://github.com/org/a*b", true},
		{`https://github.com/org/a\*b`, "https://github.com/org/axb", false},
		{"https://github.com/org/a.b", "https://github.com/org/axb", false},
		{"team-*", "team-a", true},
		{"team-*", "platform", false},
	}
	for _, c := range cases {
		re, err := compileGlob(c.pat)
		if err != nil {
			t.Fatalf("%q: %v", c.pat, err)
		}
		if got := re.MatchString(c.text); got != c.want {
			t.Errorf("%q matching %q = %v, want %v", c.pat, c.text, got, c.want)
		}
	}
	for _, bad := range []string{"a[", "a{b", "a]", `a\`, "[]", "[z-a]"} {
		if _, err := compileGlob(bad); err == nil {
			t.Errorf("%q compiled", bad)
		}
	}
}

func TestNormalizeRepoURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://GitHub.com/Org/Repo.git":    "https://github.com/org/repo",
		"\thttps://github.com/org/repo\n":    "https://github.com/org/repo",
		"git@github.com:org/repo.git":        "git@github.com/org/repo",
		"ssh://git@github.com/org/repo.git":  "git@github.com/org/repo",
		"ssh://git@github.com:22/org/repo":   "git@github.com/org/repo",
		"ssh://git@github.com:2222/org/repo": "git@github.com:2222/org/repo",
		"https://user:tok@host:8443/org/rep": "https://host:8443/org/rep",
		"https://github.com/org/%53ecret/":   "https://github.com/org/secret",
		"https://github.com/org/repo?ref=x":  "https://github.com/org/repo",
		"file:///tmp/repos/team-a.git":       "file:///tmp/repos/team-a",
		"/tmp/repos/./team-a.git/":           "/tmp/repos/team-a",
		"https://github.com/org/%zz":         "",
	} {
		if got := normalizeRepoURL(in); got != want {
			t.Errorf("normalizeRepoURL(%q) = %q, want %q", in, got, want)
		}
	}
	// A pattern keeps its glob syntax where a URL has a query or segments.
	for in, want := range map[string]string{
		"https://github.com/org/team-?":      "https://github.com/org/team-?",
		"https://github.com:443/org/*.git/":  "https://github.com/org/*",
		"git@github.com:org/{a,b}":           "git@github.com/org/{a,b}",
		"file:///**/team-a.git":              "file:///**/team-a",
		"*":                                  "*",
		`https://github.com/org/a\*b`:        `https://github.com/org/a\*b`,
		"https://github.com/org/x/../secret": "https://github.com/org/x/../secret",
	} {
		if got := normalizeRepoPattern(in); got != want {
			t.Errorf("normalizeRepoPattern(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRedactRepoURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:s3cret@host/org/repo": "https://user:xxxxx@host/org/repo",
		"https://ghp_s3cret@host/org/repo":  "https://xxxxx@host/org/repo",
		"git@github.com:org/repo":           "git@github.com:org/repo",
		"ssh://git@github.com/org/repo":     "ssh://git@github.com/org/repo",
		"https://github.com/org/repo":       "https://github.com/org/repo",
	} {
		got := redactRepoURL(in)
		if got != want || strings.Contains(got, "s3cret") {
			t.Errorf("redactRepoURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name  string
		rules Rules
		want  []string // substrings, one per problem, in order
	}{
		{"none", Rules{}, nil},
		{"fine", Rules{AllowedProjects: []string{"team-a", "platform-*", "!platform-x"}, AllowedSourceRepos: []string{"https://github.com/org/**", "!https://github.com/org/secret"}}, nil},
		{"empty list", Rules{AllowedProjects: []string{}}, []string{"allowedProjects: is empty, which would allow no one"}},
		{"empty item", Rules{AllowedProjects: []string{"a", ""}}, []string{"allowedProjects[1]: is empty"}},
		{"empty deny", Rules{AllowedSourceRepos: []string{"*", "!"}}, []string{"allowedSourceRepos[1]: is empty"}},
		{"spaces", Rules{AllowedProjects: []string{" a"}}, []string{`allowedProjects[0]: " a" has leading or trailing spaces`}},
		{"dup", Rules{AllowedProjects: []string{"a", "a"}}, []string{`allowedProjects[1]: "a" is listed twice`}},
		{"bad glob", Rules{AllowedSourceRepos: []string{"https://x/{a,b"}}, []string{`allowedSourceRepos[0]: "https://x/{a,b" is not a valid glob: unclosed '{'`}},
		{"bad project", Rules{AllowedProjects: []string{"Team_A"}}, []string{`allowedProjects[0]: "Team_A" cannot be an Argo CD project's name`}},
		{"deny all", Rules{AllowedSourceRepos: []string{"*", "!*"}}, []string{`allowedSourceRepos[1]: "!*" denies everything`}},
		{"deny only", Rules{AllowedProjects: []string{"!a"}}, []string{`allowedProjects: has only deny patterns`}},
		{"white space in repo", Rules{AllowedSourceRepos: []string{"https://x/a b"}}, []string{`allowedSourceRepos[0]: "https://x/a b" contains white space`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.rules.Validate()
			if len(got) != len(c.want) {
				t.Fatalf("problems %v, want %d: %v", got, len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.Contains(got[i].String(), w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

func TestDecide(t *testing.T) {
	rules := Rules{
		AllowedProjects:    []string{"team-a", "platform-*", "!platform-secret"},
		AllowedSourceRepos: []string{"https://github.com/org/**", "!https://github.com/org/forbidden"},
	}
	repoOnly := Rules{AllowedSourceRepos: []string{"https://github.com/org/*"}}
	projectOnly := Rules{AllowedProjects: []string{"team-a"}}
	good := "https://github.com/Org/Apps.git"
	cases := []struct {
		name  string
		rules Rules
		req   Request
		want  Reason
		field string
		deny  string
	}{
		{"no rules", Rules{}, Request{Call: Generate}, Allowed, "", ""},
		{"allowed", rules, Request{Call: Generate, Projects: []string{"team-a"}, Repos: []string{good}}, Allowed, "", ""},
		{"project glob", rules, Request{Call: Generate, Projects: []string{"platform-x"}, Repos: []string{good}}, Allowed, "", ""},
		{"project denied", rules, Request{Call: Generate, Projects: []string{"platform-secret"}, Repos: []string{good}}, ProjectNotAllowed, FieldProjects, "!platform-secret"},
		{"project other", rules, Request{Call: Generate, Projects: []string{"team-b"}, Repos: []string{good}}, ProjectNotAllowed, FieldProjects, ""},
		{"project missing", rules, Request{Call: Generate, Repos: []string{good}}, ProjectMissing, FieldProjects, ""},
		{"project empty", rules, Request{Call: Generate, Projects: []string{""}, Repos: []string{good}}, ProjectMissing, FieldProjects, ""},
		{"project twice", rules, Request{Call: Generate, Projects: []string{"team-a", "team-b"}, Repos: []string{good}}, Ambiguous, FieldProjects, ""},
		{"same project twice", rules, Request{Call: Generate, Projects: []string{"team-a", "team-a"}, Repos: []string{good}}, Allowed, "", ""},
		{"repo other", rules, Request{Call: Generate, Projects: []string{"team-a"}, Repos: []string{"https://gitlab.com/org/apps"}}, RepoNotAllowed, FieldSourceRepos, ""},
		{"repo denied", rules, Request{Call: Generate, Projects: []string{"team-a"}, Repos: []string{"https://github.com/org/forbidden.git"}}, RepoNotAllowed, FieldSourceRepos, "!https://github.com/org/forbidden"},
		{"repo missing", rules, Request{Call: Generate, Projects: []string{"team-a"}}, RepoMissing, FieldSourceRepos, ""},
		{"repo twice", rules, Request{Call: Generate, Projects: []string{"team-a"}, Repos: []string{good, "https://github.com/org/x"}}, Ambiguous, FieldSourceRepos, ""},
		{"parameters ignore project", rules, Request{Call: Parameters, Repos: []string{good}}, Allowed, "", ""},
		{"parameters check repo", rules, Request{Call: Parameters, Repos: []string{"https://gitlab.com/x"}}, RepoNotAllowed, FieldSourceRepos, ""},
		{"parameters without repo", repoOnly, Request{Call: Parameters}, RepoMissing, FieldSourceRepos, ""},
		{"parameters project only", projectOnly, Request{Call: Parameters}, Allowed, "", ""},
		{"match never refused", rules, Request{Call: Match}, NotChecked, "", ""},
		{"repo only rule, no project", repoOnly, Request{Call: Generate, Repos: []string{good}}, Allowed, "", ""},
		{"repo * does not cross /", repoOnly, Request{Call: Generate, Repos: []string{"https://github.com/org/sub/repo"}}, RepoNotAllowed, FieldSourceRepos, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(c.rules, c.req)
			if d.Reason != c.want || d.Field != c.field || d.Deny != c.deny {
				t.Fatalf("Decide = %+v, want reason %s field %q deny %q", d, c.want, c.field, c.deny)
			}
			if d.Allowed() != (c.want == Allowed || c.want == NotChecked) {
				t.Errorf("Allowed() = %v for %s", d.Allowed(), d.Reason)
			}
			msg := d.Message("vault")
			if d.Allowed() {
				if msg != "" {
					t.Errorf("message for an allowed request: %q", msg)
				}
				return
			}
			if !strings.Contains(msg, `plugin "vault"`) || !strings.Contains(msg, c.field) {
				t.Errorf("message %q names neither the plugin nor the rule", msg)
			}
			if len(c.req.Projects) == 1 && c.req.Projects[0] != "" && !strings.Contains(msg, c.req.Projects[0]) {
				t.Errorf("message %q does not name the project", msg)
			}
		})
	}
}

func TestMessageHidesCredentials(t *testing.T) {
	d := Decide(Rules{AllowedSourceRepos: []string{"https://github.com/org/*"}},
		Request{Call: Generate, Projects: []string{"team-b"}, Repos: []string{"https://bob:hunter2@gitlab.com/x"}})
	msg := d.Message("vault")
	if strings.Contains(msg, "hunter2") || !strings.Contains(msg, `project "team-b"`) {
		t.Fatalf("message %q", msg)
	}
}

func TestDescribe(t *testing.T) {
	for _, c := range []struct {
		r    Rules
		want string
	}{
		{Rules{}, "every project and repository"},
		{Rules{AllowedProjects: []string{"a", "b-*"}}, "only projects [a, b-*]"},
		{Rules{AllowedProjects: []string{"a"}, AllowedSourceRepos: []string{"https://x/*"}}, "only projects [a] and source repositories [https://x/*]"},
	} {
		if got := c.r.Describe(); got != c.want {
			t.Errorf("Describe(%+v) = %q, want %q", c.r, got, c.want)
		}
	}
}
