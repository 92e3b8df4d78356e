package engine

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/mattn/go-zglob"

	"github.com/cmp-injector/cmp-injector/cmpserver/unpack"
)

// errGlobOutside is returned for a pattern that reaches outside the repository.
var errGlobOutside = errors.New("pattern leaves the repository")

// globAny is discover.find.glob: whether pattern, relative to dir, names at
// least one existing path inside root. It is Argo CD's own matcher,
// github.com/mattn/go-zglob ("**" for any number of directories, {a,b}
// alternatives compiled into one regular expression, so no pattern expands
// exponentially), and so matches what Argo CD matches, with two checks
// around it (its errors read as Argo CD's):
//   - a pattern whose fixed part leaves the repository is an error, and a match
//     outside it (there is none: the walk starts inside) would not count;
//   - zglob.Glob walks without following symlinked directories, so "**" cannot
//     loop or leave the tree through a link.
//
// A pattern without wildcards that names nothing fails, as in Argo CD.
func globAny(root, dir, pattern string) (bool, error) {
	abs := filepath.Join(dir, pattern)
	if !unpack.Inside(root, abs) {
		return false, fmt.Errorf("%q: %w", pattern, errGlobOutside)
	}
	matches, err := zglob.Glob(abs)
	if err != nil {
		// Argo CD's words, with the pattern joined to the app dir as it
		// prints it; a pattern without wildcards naming nothing is
		// zglob's fs.ErrNotExist ("file does not exist") here too.
		return false, fmt.Errorf("error finding glob match for pattern %q: %w", abs, err)
	}
	for _, m := range matches {
		if unpack.Inside(root, m) {
			return true, nil
		}
	}
	return false, nil
}

// fileNameMatches is discover.fileName: the standard library's filepath.Glob in
// the app dir, where "**" means the same as "*".
func fileNameMatches(root, dir, pattern string) (bool, error) {
	abs := filepath.Join(dir, pattern)
	if !unpack.Inside(root, abs) {
		return false, fmt.Errorf("%q: %w", pattern, errGlobOutside)
	}
	matches, err := filepath.Glob(abs)
	if err != nil {
		return false, fmt.Errorf("error finding filename match for pattern %q: %w", abs, err) // Argo CD's words
	}
	return len(matches) > 0, nil
}
