package unpack

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Every symlink of a repository must resolve inside it, checked once the tree
// is complete. Resolving each link by walking its chain again made a chain of
// 40 links plus N links to its end cost N × 40 lstat and readlink calls, done
// twice (as each link arrived and at the end): 999,000 such links (4.9 MB
// compressed) took 9 minutes of CPU. Here a link's resolution is remembered by
// its real path, so each link is read and resolved once, and the total work
// (path components walked and links followed) has a budget of its own, so
// that long targets through many missing directories cannot make up for it.

// maxSymlinkHops bounds the links followed to resolve one path, like the
// kernel's ELOOP limit.
const maxSymlinkHops = 40

// maxSymlinkSteps bounds the work of resolving all of a tree's links: path
// components walked plus links followed, each link resolved once. A link
// costs about 3 steps plus its path's and its target's depth, so the default
// --max-files of links fits; steps are cheap (an lstat at most, each path
// once), so reaching it takes seconds, not minutes.
const maxSymlinkSteps = 10_000_000

// linkResolver resolves the paths of a finished tree as the kernel would,
// taking missing components lexically, and remembers each link's result.
type linkResolver struct {
	dest string
	// known maps the real relative path of every component looked at to its
	// resolution when it is a link; nil: not a link (or missing).
	known         map[string]*linkResult
	steps, budget int
	lstats        int
}

// linkResult is where a link leads and how many links (itself included) were
// followed to get there; busy while it is being resolved (a cycle meets it).
type linkResult struct {
	stack []string // resolved components, relative to dest
	hops  int
	busy  bool
}

func newLinkResolver(dest string, budget int) *linkResolver {
	return &linkResolver{dest: dest, known: map[string]*linkResult{}, budget: budget}
}

// check resolves the link rel (one of links) and fails if it, or any link
// on its way, leaves the repository.
func (r *linkResolver) check(rel string, links int) error {
	_, _, err := r.walk(nil, splitPath(rel), 0, rel, links)
	return err
}

// walk resolves the components pending from the real directory stack, with
// hops links followed so far, and returns the real path and the hops. rel
// and links only word errors: rel is the link being checked.
func (r *linkResolver) walk(stack, pending []string, hops int, rel string, links int) ([]string, int, error) {
	for _, part := range pending {
		r.steps++
		if r.budget > 0 && r.steps > r.budget {
			return nil, 0, fmt.Errorf("illegal filepath in symlink: resolving the repository's %d symlinks takes more than %d steps (path components walked and links followed; limit of cmp-server), reached at %q",
				links, r.budget, filepath.ToSlash(rel))
		}
		switch part {
		case ".":
			continue
		case "..":
			if len(stack) == 0 {
				return nil, 0, fmt.Errorf("illegal filepath in symlink: %q resolves outside the repository", filepath.ToSlash(rel))
			}
			stack = stack[:len(stack)-1]
			continue
		}
		path := strings.Join(append(stack, part), "/")
		link, err := r.link(path, rel, links)
		if err != nil {
			return nil, 0, err
		}
		if link == nil {
			stack = append(stack, part)
			continue
		}
		if hops += link.hops; hops > maxSymlinkHops {
			return nil, 0, fmt.Errorf("illegal filepath in symlink: %q has too many levels of symlinks", filepath.ToSlash(rel))
		}
		// A copy: the remembered result is shared.
		stack = append(make([]string, 0, len(link.stack)+1), link.stack...)
	}
	return stack, hops, nil
}

// link returns the resolution of the real path path if it is a link, nil if
// it is not (or does not exist), resolving it the first time it is met.
func (r *linkResolver) link(path, rel string, links int) (*linkResult, error) {
	if res, ok := r.known[path]; ok {
		if res != nil && res.busy {
			// The link leads back to itself: the kernel gives up after
			// maxSymlinkHops.
			return nil, fmt.Errorf("illegal filepath in symlink: %q has too many levels of symlinks", filepath.ToSlash(rel))
		}
		return res, nil
	}
	abs := filepath.Join(r.dest, filepath.FromSlash(path))
	r.lstats++
	fi, err := os.Lstat(abs)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		r.known[path] = nil
		return nil, nil
	}
	target, err := os.Readlink(abs)
	if err != nil {
		return nil, fmt.Errorf("error resolving %q: %w", filepath.ToSlash(rel), err)
	}
	if filepath.IsAbs(target) {
		return nil, fmt.Errorf("illegal filepath in symlink: %q passes through an absolute link", filepath.ToSlash(rel))
	}
	res := &linkResult{busy: true}
	r.known[path] = res
	dir := strings.Split(path, "/")
	dir = dir[:len(dir)-1]
	stack, hops, err := r.walk(dir, splitPath(target), 1, rel, links)
	if err != nil {
		return nil, err
	}
	res.stack, res.hops, res.busy = stack, hops, false
	return res, nil
}
