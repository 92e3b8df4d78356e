package tenancy

import (
	"fmt"
	"strings"
)

// Call is what the repo-server asks of a plugin; each carries different
// facts about the Application (Argo CD's repo-server, reposerver/repository):
// GenerateManifest sends the project and the repository, the parameters
// announcement only the repository, and discovery is sent whatever env the
// caller had, which may hold neither.
type Call int

const (
	// Generate is GenerateManifest: both rules apply, and a request without
	// the value a rule needs is refused.
	Generate Call = iota
	// Parameters is GetParametersAnnouncement: Argo CD sends no project with
	// it, so only allowedSourceRepos applies.
	Parameters
	// Match is MatchRepository (discovery). It is never refused: refusing
	// would make an Application without an explicit source type fall back
	// silently to plain YAML, where a refused GenerateManifest names the
	// rule on the Application.
	Match
)

// Request is what a decision reads of one request: every value of
// ARGOCD_APP_PROJECT_NAME and ARGOCD_APP_SOURCE_REPO_URL in its env (normally
// one each; none when the repo-server did not send it).
type Request struct {
	Call     Call
	Projects []string
	Repos    []string
}

// Reason says why a request was allowed or refused; the values are the
// reason label of cmp_server_tenancy_refusals_total and the logs' reason.
type Reason string

const (
	// Allowed: the rules hold, or there are none.
	Allowed Reason = "allowed"
	// NotChecked: the call is discovery, which is never refused.
	NotChecked Reason = "not_checked"
	// ProjectMissing: allowedProjects is set and the request names no
	// project: every generate from a repo-server before v3.0, which does not
	// send ARGOCD_APP_PROJECT_NAME. Refused: a rule that cannot be checked
	// does not hold.
	ProjectMissing Reason = "project_missing"
	// ProjectNotAllowed: the project matches no allowed pattern, or a deny one.
	ProjectNotAllowed Reason = "project_not_allowed"
	// RepoMissing: allowedSourceRepos is set and the request names no repository.
	RepoMissing Reason = "repo_missing"
	// RepoNotAllowed: the repository matches no allowed pattern, or a deny one.
	RepoNotAllowed Reason = "repo_not_allowed"
	// Ambiguous: the env names two different projects or repositories, so
	// which one a command would see is not known.
	Ambiguous Reason = "ambiguous"
)

// RefusalReasons are the reasons a request is refused for, for metrics that
// must have every series from the start.
var RefusalReasons = []Reason{ProjectMissing, ProjectNotAllowed, RepoMissing, RepoNotAllowed, Ambiguous}

// Decision is the outcome for one request.
type Decision struct {
	Reason Reason
	// Field is the rule that decided (allowedProjects or
	// allowedSourceRepos); "" when no rule did.
	Field string
	// Patterns is that rule's list, as written.
	Patterns []string
	// Deny is the deny pattern that matched, if one did.
	Deny string
	// Project and Repo are the request's values (Repo with its credentials
	// hidden), for messages.
	Project, Repo string
}

// Allowed reports whether the request may proceed.
func (d Decision) Allowed() bool { return d.Reason == Allowed || d.Reason == NotChecked }

// Decide applies r to req. Patterns that do not compile match nothing (the
// catalog and the plugin server validate them before they are used).
func Decide(r Rules, req Request) Decision {
	if req.Call == Match {
		return Decision{Reason: NotChecked}
	}
	project, okProject := single(req.Projects)
	repo, okRepo := single(req.Repos)
	d := Decision{Project: project, Repo: redactRepoURL(repo)}
	var checks []check
	if req.Call == Generate && r.AllowedProjects != nil {
		checks = append(checks, check{FieldProjects, r.AllowedProjects, project, okProject,
			identity, identity, ProjectMissing, ProjectNotAllowed})
	}
	if r.AllowedSourceRepos != nil {
		checks = append(checks, check{FieldSourceRepos, r.AllowedSourceRepos, repo, okRepo,
			normalizeRepoURL, normalizeRepoPattern, RepoMissing, RepoNotAllowed})
	}
	for _, c := range checks {
		if !c.holds(&d) {
			return d
		}
	}
	return Decision{Reason: Allowed, Project: d.Project, Repo: d.Repo}
}

// check is one rule of Decide and the request's value it judges.
type check struct {
	field    string
	patterns []string
	value    string
	single   bool // false: the request carries different values
	// norm is applied to the value, normPat to each pattern: the same
	// spelling, but a pattern's glob syntax is kept.
	norm, normPat func(string) string
	missing       Reason
	forbidden     Reason
}

// holds reports whether the value passes; if not, d says why.
func (c check) holds(d *Decision) bool {
	d.Field, d.Patterns = c.field, c.patterns
	switch {
	case !c.single:
		d.Reason = Ambiguous
	case c.value == "":
		d.Reason = c.missing
	default:
		ok, deny := matchList(c.patterns, c.value, c.norm, c.normPat)
		if ok {
			return true
		}
		d.Reason, d.Deny = c.forbidden, deny
	}
	return false
}

// single is the one value of vs: "" when there is none, false when there
// are different ones.
func single(vs []string) (string, bool) {
	v := ""
	for i, x := range vs {
		if i > 0 && x != v {
			return "", false
		}
		v = x
	}
	return v, true
}

// matchList: text is allowed when an allow pattern matches it and no deny
// pattern does (Argo CD's sourceRepos rule); deny is the deny pattern that
// refused it. norm is applied to the text once, before any pattern is tried,
// and normPat to every pattern; a text that norm cannot read ("") is allowed
// by none.
func matchList(patterns []string, text string, norm, normPat func(string) string) (ok bool, deny string) {
	if text = norm(text); text == "" {
		return false, ""
	}
	allowed := false
	for _, raw := range patterns {
		pat, isDeny := strings.CutPrefix(raw, "!")
		re, err := globs.get(normPat(pat))
		if err != nil {
			continue
		}
		m := re.MatchString(text)
		if isDeny && m {
			return false, raw
		}
		allowed = allowed || (m && !isDeny)
	}
	return allowed, ""
}

// Message is the refusal's text, which Argo CD shows on the Application: it
// names the plugin, the project and the rule. It is "" for an allowed
// request.
func (d Decision) Message(plugin string) string {
	if d.Allowed() {
		return ""
	}
	rule := fmt.Sprintf("%s [%s]", d.Field, strings.Join(d.Patterns, ", "))
	project := "project " + quoteOr(d.Project, "(none)")
	switch d.Reason {
	case ProjectMissing:
		return fmt.Sprintf("plugin %q refuses this request: it names no Argo CD project, and the plugin is limited to %s; Argo CD's repo-server sends the project only with GenerateManifest, and only since v3.0", plugin, rule)
	case ProjectNotAllowed:
		if d.Deny != "" {
			return fmt.Sprintf("plugin %q refuses %s: it matches %q in %s", plugin, project, d.Deny, rule)
		}
		return fmt.Sprintf("plugin %q refuses %s: it is not in %s", plugin, project, rule)
	case RepoMissing:
		return fmt.Sprintf("plugin %q refuses %s: the request names no source repository, and the plugin is limited to %s", plugin, project, rule)
	case RepoNotAllowed:
		if d.Deny != "" {
			return fmt.Sprintf("plugin %q refuses repository %q of %s: it matches %q in %s", plugin, d.Repo, project, d.Deny, rule)
		}
		return fmt.Sprintf("plugin %q refuses repository %q of %s: it matches none of %s", plugin, d.Repo, project, rule)
	default:
		return fmt.Sprintf("plugin %q refuses this request (%s): its env carries two different values of what %s checks, so which one applies is unknown", plugin, project, rule)
	}
}

func quoteOr(s, none string) string {
	if s == "" {
		return none
	}
	return fmt.Sprintf("%q", s)
}
