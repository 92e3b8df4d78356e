package cmpserver

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/mattn/go-zglob"
)

// errGlobOutside is returned for a pattern that reaches outside the repository.
var errGlobOutside = errors.New("pattern leaves the repository")

// globAny is discover.find.glob: whether pattern, relative to dir, names at
// least one existing path inside root. It is Argo CD's own matcher,
// github.com/mattn/go-zglob ("**" for any number of directories, {a,b}
// alternatives compiled into one regular expression, so no pattern expands
// exponentially), and so matches what Argo CD matches, with three checks
// around it:
//   - a pattern whose fixed part leaves the repository is an error, and a match
//     outside it (there is none: the walk starts inside) would not count;
//   - zglob.Glob walks without following symlinked directories, so "**" cannot
//     loop or leave the tree through a link;
//   - a pattern without wildcards that names nothing is "no match" here, where
//     zglob's ErrNotExist fails Argo CD's discovery.
func globAny(root, dir, pattern string) (bool, error) {
	abs := filepath.Join(dir, pattern)
	if !inside(root, abs) {
		return false, fmt.Errorf("%q: %w", pattern, errGlobOutside)
	}
	matches, err := zglob.Glob(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("%q: %w", pattern, err)
	}
	for _, m := range matches {
		if inside(root, m) {
			return true, nil
		}
	}
	return false, nil
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
