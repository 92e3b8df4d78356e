package cmpserver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// maxBraceExpansions bounds {a,b} expansion so a hostile pattern cannot explode.
const maxBraceExpansions = 1024

// errGlobOutside is returned for a pattern that reaches outside the repository.
var errGlobOutside = errors.New("pattern leaves the repository")

// globAny reports whether pattern, relative to dir, names at least one existing
// path inside root. Besides filepath.Match syntax it supports "**" as a whole path
// segment (zero or more directories, not following symlinked directories) and
// {a,b} alternatives, nested or not, which is what discover.find.glob promises.
//
// Difference from Argo CD: a pattern without wildcards that names nothing is "no
// match" here, where Argo CD's glob library returns an error.
func globAny(root, dir, pattern string) (bool, error) {
	alternatives, err := expandBraces(pattern)
	if err != nil {
		return false, err
	}
	for _, alt := range alternatives {
		abs := filepath.Join(dir, alt)
		if !inside(root, abs) {
			return false, fmt.Errorf("%q: %w", pattern, errGlobOutside)
		}
		rel, err := filepath.Rel(root, abs)
		if err != nil {
			return false, err
		}
		segments := splitPath(rel)
		for _, s := range segments {
			if _, err := filepath.Match(s, ""); err != nil {
				return false, fmt.Errorf("%q: %w", pattern, err)
			}
		}
		if ok, err := globSegments(root, segments); ok || err != nil {
			return ok, err
		}
	}
	return false, nil
}

// globSegments matches segments below the existing directory base.
func globSegments(base string, segments []string) (bool, error) {
	if len(segments) == 0 {
		return true, nil
	}
	seg, rest := segments[0], segments[1:]
	switch {
	case seg == ".":
		return globSegments(base, rest)
	case seg == "**":
		if ok, err := globSegments(base, rest); ok || err != nil {
			return ok, err
		}
		entries, err := os.ReadDir(base)
		if err != nil {
			return false, nil
		}
		for _, e := range entries {
			if e.IsDir() { // a real directory: symlinks are not followed, so no loops
				if ok, err := globSegments(filepath.Join(base, e.Name()), segments); ok || err != nil {
					return ok, err
				}
			}
		}
		return false, nil
	case !hasMeta(seg):
		next := filepath.Join(base, seg)
		if _, err := os.Lstat(next); err != nil {
			return false, nil
		}
		return descend(next, rest)
	}
	entries, err := os.ReadDir(base)
	if err != nil {
		return false, nil
	}
	for _, e := range entries {
		matched, err := filepath.Match(seg, e.Name())
		if err != nil {
			return false, err
		}
		if !matched {
			continue
		}
		if ok, err := descend(filepath.Join(base, e.Name()), rest); ok || err != nil {
			return ok, err
		}
	}
	return false, nil
}

// descend continues matching below path, which exists; more segments need it to be
// a directory (a symlink to one is followed: extraction keeps links inside).
func descend(path string, rest []string) (bool, error) {
	if len(rest) == 0 {
		return true, nil
	}
	fi, err := os.Stat(path)
	if err != nil || !fi.IsDir() {
		return false, nil
	}
	return globSegments(path, rest)
}

func hasMeta(s string) bool { return strings.ContainsAny(s, `*?[\`) }

// expandBraces turns "a{b,c{d,e}}" into [ab acd ace]. An unbalanced brace is a
// literal character, as in shells.
func expandBraces(pattern string) ([]string, error) {
	out := []string{}
	var expand func(prefix, s string) error
	expand = func(prefix, s string) error {
		open := -1
		depth := 0
		var commas []int
		for i := 0; i < len(s); i++ {
			switch s[i] {
			case '\\':
				i++
			case '{':
				if depth == 0 {
					open = i
					commas = commas[:0]
				}
				depth++
			case ',':
				if depth == 1 {
					commas = append(commas, i)
				}
			case '}':
				if depth == 0 {
					continue
				}
				depth--
				if depth > 0 {
					continue
				}
				var parts []string
				start := open + 1
				for _, c := range commas {
					parts = append(parts, s[start:c])
					start = c + 1
				}
				parts = append(parts, s[start:i])
				for _, p := range parts {
					if err := expand(prefix+s[:open], p+s[i+1:]); err != nil {
						return err
					}
				}
				return nil
			}
		}
		if len(out) >= maxBraceExpansions {
			return fmt.Errorf("pattern %q expands to more than %d alternatives", pattern, maxBraceExpansions)
		}
		out = append(out, prefix+s)
		return nil
	}
	if err := expand("", pattern); err != nil {
		return nil, err
	}
	return out, nil
}

// fileNameMatches is discover.fileName: the standard library's filepath.Glob in
// the app dir, where "**" means the same as "*".
func fileNameMatches(root, dir, pattern string) (bool, error) {
	abs := filepath.Join(dir, pattern)
	if !inside(root, abs) {
		return false, fmt.Errorf("%q: %w", pattern, errGlobOutside)
	}
	matches, err := filepath.Glob(abs)
	if err != nil {
		return false, fmt.Errorf("%q: %w", pattern, err)
	}
	return len(matches) > 0, nil
}
