package engine

import (
	"path/filepath"

	"github.com/mattn/go-zglob"
)

// maxSettleTries bounds the rule's evaluations on a partial tree: each is a
// glob over the tree so far, asked only when an entry's path fits the
// pattern; if that many did not match (a pattern that fits names its glob
// does not find), the stream is unpacked to its end and the rule evaluated
// once on the whole tree, as without MatchSettled.
const maxSettleTries = 4

// MatchSettled is unpack.Target.Settled for a MatchRepository whose rule reads
// names only (fileName or find.glob): after an entry of the tree being unpacked
// into root, it reports whether the rule already matches, so that the rest of
// the tarball need not be unpacked. The repo-server sends the whole repository
// for every discovery and walks it in lexical order, so an app's own files
// usually arrive well before the stream's end. The answer is Match's own: an
// entry whose path fits the rule's pattern triggers the same evaluation Match
// runs (nameRule.match) on the tree so far, and only its match
// settles the request; a tree that does not match is unpacked to its end, since
// a later entry may still match. nil when the rule is not by names or the app
// path leaves root (Workspace refuses it).
func (e *Engine) MatchSettled(root, appRelPath string) func(rel string) bool {
	rule, ok := e.nameRule()
	dir, inside := appDir(root, appRelPath)
	if !ok || !inside {
		return nil
	}
	pattern := filepath.Join(dir, rule.pattern)
	fits := func(abs string) bool { ok, _ := filepath.Match(pattern, abs); return ok }
	if rule.glob {
		z, err := zglob.New(pattern)
		if err != nil {
			return nil // a bad pattern: Match reports it on the whole tree
		}
		fits = z.Match
	} else if _, err := filepath.Match(pattern, ""); err != nil {
		return nil
	}
	tries := 0
	return func(rel string) bool {
		if tries >= maxSettleTries || !fits(filepath.Join(root, rel)) {
			return false
		}
		tries++
		ok, err := rule.match(root, dir)
		return err == nil && ok
	}
}
