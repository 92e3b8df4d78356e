package policy

import (
	"regexp"
	"strings"

	"github.com/distribution/reference"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
)

// referencePattern is the reference grammar the webhook parses an image
// override with (distribution/reference, as container runtimes do), for CEL's
// matches(): RE2 on both sides.
var referencePattern = reference.ReferenceRegexp.String()

// Patterns for what an allowedImages pattern leaves open: any tag, any
// digest (the grammar's).
const (
	anyTag    = `[\w][\w.-]{0,127}`
	anyDigest = `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}`
)

// imageRegexp is an allowedImages pattern (pkg/catalog's grammar: path.Match
// globs for the name, the tag and the digest) as an RE2 pattern over the
// image reference as the pod writes it.
//
// The webhook matches the reference's familiar form (alpine, not
// docker.io/library/alpine); CEL has no reference parser, so the ways Docker
// Hub names one repository are spelt out: a pattern without a registry also
// matches under docker.io/ and index.docker.io/, and a one-word pattern under
// library/. Everything else must be written as the pattern writes it, so
// the policy allows no image the webhook refuses, and refuses the odd
// spelling the webhook would normalise (TestImageRegexpNeverWiderThanWebhook).
func imageRegexp(pattern string) string {
	rest, tag, digest, hasTag, hasDigest := catalog.ImagePatternParts(pattern)
	name := dockerHubPrefix(rest) + globRegexp(rest, `[^/:@]`)
	switch {
	case !hasTag && !hasDigest:
		return "^" + name + "$"
	case hasTag && hasDigest:
		return "^" + name + ":" + globRegexp(tag, `[^/:@]`) + "@" + globRegexp(digest, `[^/@]`) + "$"
	case hasTag:
		return "^" + name + ":" + globRegexp(tag, `[^/:@]`) + "(?:@" + anyDigest + ")?$"
	default:
		return "^" + name + "(?::" + anyTag + ")?@" + globRegexp(digest, `[^/@]`) + "$"
	}
}

// dockerHubPrefix is what may precede a name pattern that names no registry
// and still be the same Docker Hub repository.
func dockerHubPrefix(name string) string {
	first, _, more := strings.Cut(name, "/")
	if strings.ContainsAny(first, "*?[\\") {
		return "" // a registry or not, undecidable: only as written
	}
	if more && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return "" // names its registry
	}
	if !more {
		return `(?:(?:docker\.io/|index\.docker\.io/)?library/|docker\.io/|index\.docker\.io/)?`
	}
	return `(?:docker\.io/|index\.docker\.io/)?`
}

// globRegexp is a path.Match pattern as RE2; one is the class a wildcard
// matches (never a '/', and never the separators of the part it is in).
func globRegexp(glob, one string) string {
	var b strings.Builder
	for i := 0; i < len(glob); i++ {
		switch c := glob[i]; c {
		case '*':
			b.WriteString(one + "*")
		case '?':
			b.WriteString(one)
		case '\\':
			if i+1 < len(glob) {
				i++
				b.WriteString(regexp.QuoteMeta(glob[i : i+1]))
			}
		case '[':
			end := strings.IndexByte(glob[i+1:], ']')
			if end < 0 {
				b.WriteString(`\[`)
				continue
			}
			class := glob[i+1 : i+1+end]
			if strings.HasPrefix(class, "^") || strings.HasPrefix(class, "!") {
				class = "^/" + class[1:] // a negated class never matches '/' in path.Match either
			}
			b.WriteString("[" + class + "]")
			i += end + 1
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	return b.String()
}
