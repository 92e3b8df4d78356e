// Package tenancy decides which Argo CD projects and source repositories may
// use a plugin (argo-cd#21177: Argo CD has no RBAC on plugins). The rules are
// written by the admin in the catalog, travel to the sidecar inside its
// plugin.yaml, and are applied by cmp-server to every request; this package
// holds the rules, their validation and the decision, and does no I/O.
package tenancy

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Rules are who may use a plugin. A nil list allows everyone, as before the
// rules existed; a list allows a value that matches one of its patterns and
// none of its deny patterns ("!" first). The same fields appear on a catalog
// plugin and in the plugin.yaml the sidecar reads.
type Rules struct {
	// AllowedProjects are Argo CD project names (spec.project of the
	// Application), or globs of them.
	AllowedProjects []string `json:"allowedProjects,omitempty"`
	// AllowedSourceRepos are globs of source repository URLs, matched the
	// way Argo CD matches an AppProject's sourceRepos.
	AllowedSourceRepos []string `json:"allowedSourceRepos,omitempty"`
}

// Field names, as the catalog and plugin.yaml spell them.
const (
	FieldProjects    = "allowedProjects"
	FieldSourceRepos = "allowedSourceRepos"
)

// IsSet reports whether r restricts anything.
func (r Rules) IsSet() bool { return r.AllowedProjects != nil || r.AllowedSourceRepos != nil }

// Problem is one defect of a rule list, at Field (e.g. "allowedProjects[1]").
type Problem struct {
	Field   string
	Message string
}

func (p Problem) String() string { return p.Field + ": " + p.Message }

// Validate returns every defect of r, so that an admin fixes all of them in
// one round: an empty list (which would allow nobody; leave the field out to
// allow everyone), empty or malformed patterns, duplicates, "!*", a list of
// deny patterns only (which allows nothing: as Argo CD documents sourceRepos,
// a value needs an allow pattern that matches and no deny pattern that
// does), and a project that is not a glob and could not be a project's name.
func (r Rules) Validate() []Problem {
	var out []Problem
	out = append(out, validateList(FieldProjects, r.AllowedProjects, identity, checkProject)...)
	out = append(out, validateList(FieldSourceRepos, r.AllowedSourceRepos, normalizeRepoPattern, checkRepo)...)
	return out
}

// validateList checks each pattern as Decide uses it: normalised by norm.
func validateList(field string, list []string, norm func(string) string, check func(string) string) []Problem {
	if list == nil {
		return nil
	}
	var out []Problem
	if len(list) == 0 {
		return []Problem{{field, "is empty, which would allow no one; leave it out to allow everyone, or list at least one pattern"}}
	}
	seen := map[string]bool{}
	allows := 0
	for i, raw := range list {
		item := fmt.Sprintf("%s[%d]", field, i)
		pat, deny := strings.CutPrefix(raw, "!")
		if !deny {
			allows++
		}
		switch {
		case strings.TrimSpace(pat) == "":
			out = append(out, Problem{item, "is empty"})
			continue
		case pat != strings.TrimSpace(pat):
			out = append(out, Problem{item, fmt.Sprintf("%q has leading or trailing spaces", raw)})
			continue
		case raw == "!*":
			out = append(out, Problem{item, `"!*" denies everything; to let no one use the plugin, take it out of the catalog's namespaces`})
			continue
		case seen[raw]:
			out = append(out, Problem{item, fmt.Sprintf("%q is listed twice", raw)})
			continue
		}
		seen[raw] = true
		if _, err := compileGlob(norm(pat)); err != nil {
			out = append(out, Problem{item, fmt.Sprintf("%q is not a valid glob: %v", raw, err)})
			continue
		}
		if msg := check(pat); msg != "" {
			out = append(out, Problem{item, fmt.Sprintf("%q %s", raw, msg)})
		}
	}
	if allows == 0 {
		out = append(out, Problem{field, `has only deny patterns ("!…"), which allow nothing; add "*" to allow everything else`})
	}
	return out
}

func identity(s string) string { return s }

// checkProject: a pattern without glob syntax must be a possible AppProject
// name (a Kubernetes object name), or it names a project that cannot exist.
func checkProject(pat string) string {
	if hasGlobSyntax(pat) {
		return ""
	}
	if errs := validation.IsDNS1123Subdomain(pat); len(errs) > 0 {
		return "cannot be an Argo CD project's name: " + strings.Join(errs, ", ")
	}
	return ""
}

// checkRepo refuses what no repository URL can contain.
func checkRepo(pat string) string {
	if strings.ContainsAny(pat, " \t\r\n") {
		return "contains white space, which no repository URL has"
	}
	return ""
}

// Describe says who may use a plugin with rules r, for explain and doctor.
func (r Rules) Describe() string {
	if !r.IsSet() {
		return "every project and repository"
	}
	var parts []string
	if r.AllowedProjects != nil {
		parts = append(parts, "projects ["+strings.Join(r.AllowedProjects, ", ")+"]")
	}
	if r.AllowedSourceRepos != nil {
		parts = append(parts, "source repositories ["+strings.Join(r.AllowedSourceRepos, ", ")+"]")
	}
	return "only " + strings.Join(parts, " and ")
}
