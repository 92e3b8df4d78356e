package catalog

import (
	"fmt"
	"path"
	"strings"

	"github.com/distribution/reference"
)

// Image is a parsed image reference in its familiar form (alpine/helm, not
// docker.io/library/...), as admins write allowedImages patterns.
type Image struct {
	Name   string // familiar repository name, e.g. alpine/helm or quay.io/argoproj/argocd
	Tag    string // "" when absent
	Digest string // "" when absent
}

// parseImage parses ref with the reference grammar the container runtimes use:
// newlines, empty tags, upper-case names and the like are errors, not strings
// a pattern might happen to match.
func parseImage(ref string) (Image, error) {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return Image{}, fmt.Errorf("%q is not a valid image reference: %w", ref, err)
	}
	img := Image{Name: reference.FamiliarName(named)}
	if t, ok := named.(reference.Tagged); ok {
		img.Tag = t.Tag()
	}
	if d, ok := named.(reference.Digested); ok {
		img.Digest = d.Digest().String()
	}
	return img, nil
}

// imagePattern is an allowedImages entry split like an image: a path.Match
// pattern for the name and one for the tag or the digest.
type imagePattern struct {
	name, tag, digest string
	hasTag, hasDigest bool
}

// ImagePatternParts splits an allowedImages pattern as the webhook matches
// it: the name's pattern, then the tag's and the digest's when it has them
// (a renderer of the same rule in another language splits it here too).
func ImagePatternParts(p string) (name, tag, digest string, hasTag, hasDigest bool) {
	rest := p
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		digest, hasDigest, rest = rest[i+1:], true, rest[:i]
	}
	if i := strings.LastIndex(rest, ":"); i > strings.LastIndex(rest, "/") {
		tag, hasTag, rest = rest[i+1:], true, rest[:i]
	}
	return rest, tag, digest, hasTag, hasDigest
}

func parseImagePattern(p string) (imagePattern, error) {
	var ip imagePattern
	ip.name, ip.tag, ip.digest, ip.hasTag, ip.hasDigest = ImagePatternParts(p)
	for _, part := range []string{ip.name, ip.tag, ip.digest} {
		if _, err := path.Match(part, ""); err != nil {
			return ip, fmt.Errorf("invalid pattern %q: %w", p, err)
		}
	}
	if ip.name == "" || (ip.hasTag && ip.tag == "") || (ip.hasDigest && ip.digest == "") {
		return ip, fmt.Errorf("invalid pattern %q: name, tag and digest parts must not be empty", p)
	}
	return ip, nil
}

// matches applies the pattern part by part: the name, then the tag pattern to
// the tag and the digest pattern to the digest; an image without a tag or
// digest never matches a pattern that names one, and a pattern without them
// allows only the bare name.
func (ip imagePattern) matches(img Image) bool {
	if ok, _ := path.Match(ip.name, img.Name); !ok {
		return false
	}
	if !ip.hasTag && !ip.hasDigest {
		return img.Tag == "" && img.Digest == ""
	}
	if ip.hasTag {
		if ok, _ := path.Match(ip.tag, img.Tag); img.Tag == "" || !ok {
			return false
		}
	}
	if ip.hasDigest {
		if ok, _ := path.Match(ip.digest, img.Digest); img.Digest == "" || !ok {
			return false
		}
	} else if img.Digest != "" && img.Tag == "" {
		return false
	}
	return true
}

// ImageAllowed parses ref and reports whether one of patterns allows it; an
// unparsable reference or pattern is an error.
func ImageAllowed(ref string, patterns []string) (bool, error) {
	img, err := parseImage(ref)
	if err != nil {
		return false, err
	}
	for _, p := range patterns {
		ip, err := parseImagePattern(p)
		if err != nil {
			return false, err
		}
		if ip.matches(img) {
			return true, nil
		}
	}
	return false, nil
}
