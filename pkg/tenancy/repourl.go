package tenancy

import (
	"net/url"
	"regexp"
	"strings"
)

// scpLike is git's user@host:path form of an SSH URL, without a scheme.
var scpLike = regexp.MustCompile(`^[^/:]*@[^@/:]+:`)

// normalizeRepoURL puts a repository URL in the form Argo CD compares
// sourceRepos in: lower case, without a ".git" suffix, and an SSH URL
// (ssh://git@host/org/repo or git@host:org/repo) as git@host/org/repo. Both
// the patterns and a request's URL are normalised, so that
// https://GitHub.com/Org/Repo.git and https://github.com/org/repo are one
// repository.
func normalizeRepoURL(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if scpLike.MatchString(s) {
		s = strings.Replace(s, ":", "/", 1)
	}
	s = strings.TrimPrefix(s, "ssh://")
	return strings.TrimSuffix(s, ".git")
}

// redactRepoURL hides the credentials of a URL that carries some, for logs
// and messages: a password (https://user:token@host/…, shown as xxxxx) and,
// over HTTP, a user name alone, where hosts accept a token
// (https://token@host/…).
func redactRepoURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		if i := strings.LastIndex(s, "@"); i >= 0 && strings.Contains(s[:i], "//") {
			// Not a URL Go reads, yet with something before a host: hide it.
			return s[:strings.Index(s, "//")+2] + "xxxxx" + s[i:]
		}
		return s
	}
	if u.User == nil {
		return s
	}
	if _, hasPassword := u.User.Password(); !hasPassword && (u.Scheme == "http" || u.Scheme == "https") {
		u.User = url.User("xxxxx")
	}
	return u.Redacted()
}
