package tenancy

import (
	"net/url"
	"path"
	"strings"
)

// A repository URL is matched as the repository git fetches with it, not as
// the string it is: an attack run got past a deny pattern
// "!https://github.com/org/secret" with ".../secret/", ".../secret.git/",
// ".../org/./secret", ".../org/x/../secret", ".../org/%73ecret" and
// ".../team-a-sandbox?x=1", each of which the Git server resolves to the
// denied repository. So the request's URL is normalised once, before it is
// matched against any pattern, allow or deny, into one canonical spelling,
// and the patterns into the same one.
//
// The canonical spelling is Argo CD's (util/git NormalizeGitURL, which its
// AppProject sourceRepos matching uses): lower case, no ".git" suffix, an SSH
// URL (ssh://git@host/org/repo or git@host:org/repo) as git@host/org/repo.
// Beyond Argo CD, what git and the server resolve the same way is made the
// same: the path percent-decoded and its "." and ".." segments and repeated
// and trailing slashes resolved (git's curl does the first two, the servers
// ignore the rest), the query and fragment dropped, a default port (http 80,
// https 443, ssh 22, git 9418) and a host's trailing dot dropped, the
// credentials of a non-SSH URL dropped (they choose who fetches, not what),
// and git+ssh:// and ssh+git:// read as ssh://, as git reads them.

// defaultPorts are the ports a scheme's URL names by leaving its port out.
var defaultPorts = map[string]string{"http": "80", "https": "443", "ssh": "22", "git": "9418"}

// normalizeRepoURL is the canonical spelling of a request's repository URL;
// "" for one that is not a URL git could fetch from (an invalid
// percent-escape), which no pattern then allows.
func normalizeRepoURL(s string) string {
	n, ok := normalizeRepo(s, false)
	if !ok {
		return ""
	}
	return n
}

// normalizeRepoPattern is a pattern in the same spelling. A pattern is a
// glob: "?", "[", "{" and "\" are its syntax, not a query or an escape, so
// only the parts that cannot hold glob syntax differently are rewritten (the
// scheme, the credentials, a default port, the host's trailing dot, the
// suffixes); an invalid percent-escape is kept as written.
func normalizeRepoPattern(s string) string {
	n, _ := normalizeRepo(s, true)
	return n
}

// normalizeRepo does both; ok is false when a URL's escapes do not decode.
func normalizeRepo(s string, pattern bool) (string, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	scheme, rest, hasScheme := strings.Cut(s, "://")
	if hasScheme && (scheme == "" || strings.ContainsAny(scheme, "/@")) {
		hasScheme, rest = false, s // "://" inside a path or an scp-like URL's path
	}
	if !hasScheme {
		// git's scp-like syntax: [user@]host:path, a colon before any slash.
		colon, slash := strings.IndexByte(s, ':'), strings.IndexByte(s, '/')
		if colon <= 0 || (slash >= 0 && slash < colon) {
			// A local path: only its segments can differ.
			p, ok := cleanPath(s, pattern)
			return p, ok
		}
		scheme, rest = "ssh", s[:colon]+"/"+s[colon+1:]
	}
	if scheme == "git+ssh" || scheme == "ssh+git" {
		scheme = "ssh"
	}
	if !pattern {
		// The query and fragment name no repository; a pattern's "?" is a glob.
		if i := strings.IndexAny(rest, "?#"); i >= 0 {
			rest = rest[:i]
		}
	}
	authority, p, _ := strings.Cut(rest, "/")
	user, hostport, hasUser := "", authority, false
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		user, hostport, hasUser = authority[:i], authority[i+1:], true
	}
	host, port := hostport, ""
	if i := strings.LastIndexByte(hostport, ':'); i >= 0 && !strings.Contains(hostport[i:], "]") {
		host, port = hostport[:i], hostport[i+1:]
	}
	if !pattern {
		if d, err := url.PathUnescape(host); err == nil {
			host = strings.ToLower(d)
		} else {
			return "", false
		}
	}
	host = strings.TrimSuffix(host, ".")
	if port == defaultPorts[scheme] {
		port = ""
	}
	p, ok := cleanPath("/"+p, pattern)
	var b strings.Builder
	if scheme != "ssh" {
		// Argo CD keeps the scheme of every URL but an SSH one.
		b.WriteString(scheme + "://")
	} else if hasUser {
		// The SSH user is part of what Argo CD compares (git@...); its
		// password, if any, is not.
		u, _, _ := strings.Cut(user, ":")
		b.WriteString(u + "@")
	}
	b.WriteString(host)
	if port != "" {
		b.WriteString(":" + port)
	}
	if p != "" && p != "/" {
		b.WriteString(p)
	}
	return b.String(), ok
}

// cleanPath decodes p's percent-escapes (a URL's only), resolves its "." and
// ".." segments (a URL's only: in a pattern ".." is written by the admin,
// and "**" must keep its place) and repeated slashes, then drops trailing
// slashes and one ".git" suffix, as a Git server does.
func cleanPath(p string, pattern bool) (string, bool) {
	ok := true
	if d, err := url.PathUnescape(p); err == nil {
		// Lower case again: "%53ecret" is "Secret".
		p = strings.ToLower(d)
	} else if !pattern {
		ok = false
	}
	if !pattern && p != "" {
		abs := strings.HasPrefix(p, "/")
		p = path.Clean("/" + p)
		if !abs {
			p = strings.TrimPrefix(p, "/")
		}
	}
	for strings.Contains(p, "//") {
		p = strings.ReplaceAll(p, "//", "/")
	}
	p = strings.TrimRight(p, "/")
	p = strings.TrimSuffix(p, ".git")
	p = strings.TrimRight(p, "/")
	return p, ok
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
