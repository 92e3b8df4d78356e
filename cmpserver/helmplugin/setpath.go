package helmplugin

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// maxListIndex is the largest list index helm's --set parser accepts.
const maxListIndex = 65536

// segment is one step of a --set key: a map key, or a list index when isIndex is set.
type segment struct {
	name    string
	index   int
	isIndex bool
}

// setPath is a parsed --set key such as `a.b[0].c` or `annotations.prometheus\.io/scrape`.
type setPath []segment

// keySpecial are the runes helm's --set key parser stops at; a backslash before any
// rune makes it literal. `]` and `\` are escaped as well so that every emitted key
// parses back to the same segments.
const keySpecial = `\.[]=,`

// parseSetPath reads a key in --set syntax. Dots and brackets are structure, a
// backslash makes the next rune literal, and `=` or `,` are taken literally (they are
// re-escaped on output) so a key can never smuggle in a second assignment.
func parseSetPath(key string) (setPath, error) {
	if key == "" {
		return nil, errors.New("empty key")
	}
	var (
		path    setPath
		cur     strings.Builder
		inName  = true // a name segment is being read (possibly empty so far)
		escaped bool
	)
	flushName := func(pos int) error {
		if cur.Len() == 0 {
			return fmt.Errorf("key %q: empty name at offset %d", key, pos)
		}
		path = append(path, segment{name: cur.String()})
		cur.Reset()
		return nil
	}
	runes := []rune(key)
	for i := 0; i < len(runes); i++ {
		r := runes[i]
		if escaped {
			cur.WriteRune(r)
			escaped = false
			continue
		}
		if !inName {
			// After `]` only `.` or `[` may follow.
			switch r {
			case '.':
				inName = true
				continue
			case '[':
			default:
				return nil, fmt.Errorf("key %q: unexpected %q after list index at offset %d", key, r, i)
			}
		}
		switch r {
		case '\\':
			escaped = true
		case '.':
			if err := flushName(i); err != nil {
				return nil, err
			}
		case '[':
			if inName {
				if err := flushName(i); err != nil {
					return nil, err
				}
			}
			end := i + 1
			for end < len(runes) && runes[end] != ']' {
				end++
			}
			if end == len(runes) {
				return nil, fmt.Errorf("key %q: unterminated list index at offset %d", key, i)
			}
			digits := string(runes[i+1 : end])
			n, err := strconv.Atoi(digits)
			if err != nil || digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
				return nil, fmt.Errorf("key %q: list index %q is not a non-negative integer", key, digits)
			}
			if n > maxListIndex {
				return nil, fmt.Errorf("key %q: list index %d is above helm's maximum %d", key, n, maxListIndex)
			}
			path = append(path, segment{index: n, isIndex: true})
			i = end
			inName = false
		default:
			cur.WriteRune(r)
		}
	}
	if escaped {
		return nil, fmt.Errorf("key %q: trailing backslash", key)
	}
	if inName {
		if err := flushName(len(runes)); err != nil {
			return nil, err
		}
	}
	return path, nil
}

// escapeKeyName escapes one map key so that helm's --set parser reads it back as a
// single literal segment.
func escapeKeyName(name string) string {
	if !strings.ContainsAny(name, keySpecial) {
		return name
	}
	var b strings.Builder
	for _, r := range name {
		if strings.ContainsRune(keySpecial, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// String renders the path in canonical --set key syntax.
func (p setPath) String() string {
	var b strings.Builder
	for i, s := range p {
		if s.isIndex {
			fmt.Fprintf(&b, "[%d]", s.index)
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(escapeKeyName(s.name))
	}
	return b.String()
}

// escapeSetValue makes helm's --set family read v literally: a backslash makes the
// next rune literal, an unescaped comma would start a new assignment, and a leading
// `{` would make the value a list.
func escapeSetValue(v string) string {
	var b strings.Builder
	b.Grow(len(v) + 2)
	for i, r := range v {
		if r == '\\' || r == ',' || (i == 0 && r == '{') {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// setArg builds the argument of one --set, --set-string or --set-file flag from a
// user key in --set syntax and a literal value.
func setArg(key, value string) (string, error) {
	p, err := parseSetPath(key)
	if err != nil {
		return "", err
	}
	return p.String() + "=" + escapeSetValue(value), nil
}
