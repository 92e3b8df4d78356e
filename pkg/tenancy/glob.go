package tenancy

import (
	"errors"
	"regexp"
	"strings"
)

// Globs follow Argo CD's matching of an AppProject's sourceRepos (its
// util/glob, gobwas/glob with '/' as the separator), so that an admin writes
// the patterns the projects already use:
//
//	*       any run of characters except '/'
//	**      any run of characters, '/' included
//	?       one character except '/'
//	[a-z]   one character of a class; [!a-z] one outside it
//	{a,b}   one of the alternatives, each itself a pattern
//	\x      x itself
//
// and the pattern "*" alone matches everything, as in Argo CD. A glob is
// translated to an anchored regular expression, which matches in linear time
// whatever the pattern (the patterns are the admin's, the text a request's).
// gobwas/glob v0.2.3 itself was tried and left out: it accepts unbalanced
// patterns with meanings nobody intends ("a{b" matches "ab", "a\" matches
// "a"), and matching "0{" against "0" panics inside it (FuzzGlob's corpus
// keeps that input); a check that runs on every request must not.

// separator is what '*' and '?' do not cross.
const separator = '/'

// hasGlobSyntax reports whether pat uses any glob syntax.
func hasGlobSyntax(pat string) bool { return strings.ContainsAny(pat, `*?[]{}\`) }

// compileGlob translates pat.
func compileGlob(pat string) (*regexp.Regexp, error) {
	if pat == "*" {
		return regexp.MustCompile(`(?s)^.*$`), nil
	}
	var b strings.Builder
	b.WriteString(`(?s)^`)
	rest, err := translate(&b, pat, 0)
	if err != nil {
		return nil, err
	}
	if rest != "" {
		return nil, errors.New("unmatched '}'")
	}
	b.WriteString(`$`)
	return regexp.Compile(b.String())
}

// translate writes pat to b until its end or, inside braces (depth > 0), the
// ',' or '}' that ends the alternative; it returns what follows.
func translate(b *strings.Builder, pat string, depth int) (string, error) {
	notSep := `[^` + regexp.QuoteMeta(string(separator)) + `]`
	for pat != "" {
		c := pat[0]
		switch {
		case c == '*' && strings.HasPrefix(pat, "**"):
			b.WriteString(`.*`)
			pat = strings.TrimLeft(pat, "*")
		case c == '*':
			b.WriteString(notSep + `*`)
			pat = pat[1:]
		case c == '?':
			b.WriteString(notSep)
			pat = pat[1:]
		case c == '\\':
			if len(pat) < 2 {
				return "", errors.New("trailing '\\'")
			}
			r, n := firstRune(pat[1:])
			b.WriteString(regexp.QuoteMeta(r))
			pat = pat[1+n:]
		case c == '[':
			end := strings.IndexByte(pat, ']')
			if end < 0 {
				return "", errors.New("unclosed '['")
			}
			class := pat[1:end]
			neg := strings.HasPrefix(class, "!")
			if neg {
				class = class[1:]
			}
			if class == "" {
				return "", errors.New("empty character class")
			}
			b.WriteString("[")
			if neg {
				b.WriteString("^")
			}
			if err := writeClass(b, class); err != nil {
				return "", err
			}
			b.WriteString("]")
			pat = pat[end+1:]
		case c == ']':
			return "", errors.New("unmatched ']'")
		case c == '{':
			b.WriteString(`(?:`)
			rest := pat[1:]
			for {
				var err error
				if rest, err = translate(b, rest, depth+1); err != nil {
					return "", err
				}
				if rest == "" {
					return "", errors.New("unclosed '{'")
				}
				if rest[0] == '}' {
					rest = rest[1:]
					break
				}
				b.WriteString("|") // rest[0] == ','
				rest = rest[1:]
			}
			b.WriteString(`)`)
			pat = rest
		case depth > 0 && (c == ',' || c == '}'):
			return pat, nil
		default:
			r, n := firstRune(pat)
			b.WriteString(regexp.QuoteMeta(r))
			pat = pat[n:]
		}
	}
	return "", nil
}

// writeClass writes the inside of a character class: single characters and
// lo-hi ranges, each quoted for the regular expression.
func writeClass(b *strings.Builder, class string) error {
	rs := []rune(class)
	for i := 0; i < len(rs); i++ {
		if i+2 < len(rs) && rs[i+1] == '-' {
			if rs[i+2] < rs[i] {
				return errors.New("character range out of order")
			}
			b.WriteString(regexp.QuoteMeta(string(rs[i])) + "-" + regexp.QuoteMeta(string(rs[i+2])))
			i += 2
			continue
		}
		b.WriteString(quoteClassRune(rs[i]))
	}
	return nil
}

// quoteClassRune escapes what is special inside a regexp class.
func quoteClassRune(r rune) string {
	switch r {
	case '\\', ']', '[', '^', '-':
		return `\` + string(r)
	}
	return string(r)
}

func firstRune(s string) (string, int) {
	for i := range s {
		if i > 0 {
			return s[:i], i
		}
	}
	return s, len(s)
}
