package redact

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"
)

// A tool that fails often prints the value it was given in another form
// than the one it was given: git and curl print a URL whose userinfo is
// percent-encoded, curl -v an Authorization header in base64 (of
// "user:token", so the value starts anywhere in the encoded text), a
// Kubernetes tool a Secret's data in base64, a debugging aid the bytes in
// hex, Python a KeyError with repr(), `set -x` a shell-quoted command line,
// a YAML dump a single-quoted scalar. Each is one more form of the value
// for the scanner; forms equal to another (a token of letters and digits
// has one percent-encoding, the value itself) are kept once by newRedactor,
// so an ordinary token costs its raw, cased, hex and base64 forms only.

// quotings are value inside the quotes of YAML's single-quoted scalars
// (' doubled), Python's repr (quotes and backslashes escaped), a POSIX shell's
// single quotes ('\” and '"'"' for a quote, as bash's set -x and Python's
// shlex print it) and its double quotes (\ " $ ` escaped).
func quotings(value string) []string {
	return []string{
		strings.ReplaceAll(value, "'", "''"),
		pythonRepr(value),
		strings.ReplaceAll(value, "'", `'\''`),
		strings.ReplaceAll(value, "'", `'"'"'`),
		strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `\$`, "`", "\\`").Replace(value),
	}
}

// pythonRepr is what Python's repr() prints between the quotes of a str:
// single quotes unless the value has one and no double quote; the chosen
// quote, backslashes and \t \n \r escaped; other control characters as \xNN.
func pythonRepr(value string) string {
	quote := byte('\'')
	if strings.Contains(value, "'") && !strings.Contains(value, `"`) {
		quote = '"'
	}
	var b strings.Builder
	for _, r := range value {
		switch {
		case r == '\\' || r == rune(quote):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r == utf8.RuneError:
			b.WriteString(`\ufffd`)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// encodings are value percent-encoded (as a query, a path, a URL's userinfo,
// and every byte; each with upper- and lower-case hex digits, since both are
// valid and tools differ), in hex (both cases) and in base64 (both
// alphabets, at each of the three offsets a value can start at in a longer
// encoded text).
func encodings(value string) []string {
	user := url.UserPassword("u", value).String()
	pct := []string{url.QueryEscape(value), url.PathEscape(value), user[strings.IndexByte(user, ':')+1:], percentAll(value)}
	out := make([]string, 0, 2*len(pct)+8)
	for _, p := range pct {
		out = append(out, p, lowerPercent(p))
	}
	h := hex.EncodeToString([]byte(value))
	out = append(out, h, strings.ToUpper(h))
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for shift := range 3 {
			out = append(out, base64Core(enc, value, shift))
		}
	}
	return out
}

// percentAll is every byte of value as %XX, as some tools encode userinfo.
func percentAll(value string) string {
	var b strings.Builder
	for i := range len(value) {
		fmt.Fprintf(&b, "%%%02X", value[i])
	}
	return b.String()
}

// lowerPercent is s with the hex digits of each %XX in lower case.
func lowerPercent(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1] = toLowerASCII(b[i+1])
			b[i+2] = toLowerASCII(b[i+2])
			i += 2
		}
	}
	return string(b)
}

func toLowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// base64Core is the part of the base64 of a text that depends on value alone
// when value starts shift bytes (0-2) into a group of three: each character
// carries six bits, and only those whose six bits all lie within value's are
// the same whatever comes before and after it. The one or two characters at
// either end that mix in the neighbours' bits (or padding) are left out, so
// the core is found padded or not, alone or inside a longer encoding (curl's
// "Authorization: Basic" of user:token), and what is left of the value next
// to a redaction is at most a few bits.
func base64Core(enc *base64.Encoding, value string, shift int) string {
	buf := make([]byte, shift+len(value))
	copy(buf[shift:], value)
	e := enc.EncodeToString(buf)
	start, end := (8*shift+5)/6, 8*(shift+len(value))/6
	if start >= end {
		return ""
	}
	return e[start:end]
}
