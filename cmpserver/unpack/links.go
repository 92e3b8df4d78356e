package unpack

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Every symlink of a repository must resolve inside it, checked once the tree
// is complete. Resolving each link by walking its chain again made a chain of
// 40 links plus N links to its end cost N × 40 lstat and readlink calls, done
// twice (as each link arrived and at the end): 999,000 such links (4.9 MB
// compressed) took 9 minutes of CPU. Here the resolution of a link that leads
// // is remembered by the link's real path, so each link is read and resolved
// once; directories the extraction made need no lstat at all. What is kept is
// one existing path per link, like the names the extraction already holds,
// and for links that lead nowhere (a missing component, taken lexically) at
// most maxDanglingBytes. The total work has a budget of its own.

// maxSymlinkHops bounds the links followed to resolve one path, like the
// kernel's ELOOP limit.
const maxSymlinkHops = 40

// maxSymlinkSteps bounds the work of resolving all of a tree's links: a step
// is a path component walked or a remembered link followed, and a path
// longer than 256 bytes costs a step more for each 256 bytes (it is copied,
// hashed and looked up whole). A link costs about 3 steps plus its path's and
// its target's depth, so the default --max-files of ordinary links fits,
// and the budget is spent in seconds, not minutes.
const maxSymlinkSteps = 10_000_000

// linkResolver resolves the paths of a finished tree as the kernel would,
// taking missing components lexically.
type linkResolver struct {
	dest     string
	realDirs map[string]bool // the extraction's real directories (never replaced)
	// known holds, by real relative path, the links resolved so far whose
	// target exists (and, up to maxDanglingBytes, those whose target does not),
	// and the links being resolved (busy).
	known         map[string]*linkResult
	steps, budget int
	lstats        int
	links         int // the tree's links, for the budget's message
	danglingBytes int // the paths of dangling links remembered
}

// maxDanglingBytes caps the paths kept for links that lead nowhere: their
// missing tail is taken lexically, so it is not a name the tree holds.
const maxDanglingBytes = 16 << 20

// danglingCap is maxDanglingBytes, which a test lowers.
var danglingCap = maxDanglingBytes

// linkResult is where a link leads (an existing path relative to dest, ""
// for dest itself) and how many links, itself included, were followed.
type linkResult struct {
	path     string
	hops     int
	busy     bool // being resolved: met again, it is a cycle
	dangling bool // path does not exist (such a result is not remembered)
}

func newLinkResolver(dest string, realDirs map[string]bool, links, budget int) *linkResolver {
	return &linkResolver{dest: dest, realDirs: realDirs, known: map[string]*linkResult{}, links: links, budget: budget}
}

// check resolves the link rel and fails if it, or any link on its way,
// leaves the repository or goes beyond a limit.
func (r *linkResolver) check(rel string) error {
	_, _, _, err := r.walk("", splitPath(rel), 0, rel)
	return err
}

// walk resolves the components pending from the real directory cur ("" is
// dest) with hops links followed so far, and returns the real path, the hops
// and whether the path exists. rel only words errors: it is the link being
// checked.
func (r *linkResolver) walk(cur string, pending []string, hops int, rel string) (string, int, bool, error) {
	exists := true // dest does
	for _, part := range pending {
		switch part {
		case ".":
			continue
		case "..":
			if cur == "" {
				return "", 0, false, fmt.Errorf("illegal filepath in symlink: %q resolves outside the repository", filepath.ToSlash(rel))
			}
			cur = cur[:max(strings.LastIndexByte(cur, '/'), 0)]
			if !exists {
				// The parent of a missing path may exist. (Cleaned paths
				// have ".." only in front, where the path exists.)
				kind, _, err := r.lookup(cur, rel)
				if err != nil {
					return "", 0, false, err
				}
				exists = cur == "" || kind != missing
			}
			continue
		}
		if cur == "" {
			cur = part
		} else {
			cur += "/" + part
		}
		if err := r.spend(1+len(cur)/256, rel); err != nil {
			return "", 0, false, err
		}
		if !exists {
			continue // below a missing component, everything is missing
		}
		kind, link, err := r.lookup(cur, rel)
		if err != nil {
			return "", 0, false, err
		}
		switch kind {
		case missing:
			exists = false
		case isLink:
			if hops += link.hops; hops > maxSymlinkHops {
				return "", 0, false, fmt.Errorf("illegal filepath in symlink: %q has too many levels of symlinks", filepath.ToSlash(rel))
			}
			cur, exists = link.path, !link.dangling
		}
	}
	return cur, hops, exists, nil
}

// spend charges the budget.
func (r *linkResolver) spend(steps int, rel string) error {
	r.steps += steps
	if r.budget > 0 && r.steps > r.budget {
		return fmt.Errorf("illegal filepath in symlink: resolving the repository's %d symlinks takes more than %d steps (path components walked and links followed; limit of cmp-server), reached at %q",
			r.links, r.budget, filepath.ToSlash(rel))
	}
	return nil
}

type entryKind int

const (
	present entryKind = iota // a directory or a file
	missing
	isLink
)

// lookup says what the real path path is; for a link, where it leads,
// resolving it the first time it is met.
func (r *linkResolver) lookup(path, rel string) (entryKind, *linkResult, error) {
	if r.realDirs[filepath.FromSlash(path)] {
		return present, nil, nil
	}
	if res, ok := r.known[path]; ok {
		if res.busy {
			// The link leads back to itself: the kernel gives up after
			// maxSymlinkHops.
			return 0, nil, fmt.Errorf("illegal filepath in symlink: %q has too many levels of symlinks", filepath.ToSlash(rel))
		}
		return isLink, res, nil
	}
	abs := filepath.Join(r.dest, filepath.FromSlash(path))
	r.lstats++
	fi, err := os.Lstat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return missing, nil, nil
	case err != nil:
		return 0, nil, fmt.Errorf("error resolving %q: %w", filepath.ToSlash(rel), err)
	case fi.Mode()&fs.ModeSymlink == 0:
		return present, nil, nil
	}
	target, err := os.Readlink(abs)
	if err != nil {
		return 0, nil, fmt.Errorf("error resolving %q: %w", filepath.ToSlash(rel), err)
	}
	if filepath.IsAbs(target) {
		return 0, nil, fmt.Errorf("illegal filepath in symlink: %q passes through an absolute link", filepath.ToSlash(rel))
	}
	busy := &linkResult{busy: true}
	r.known[path] = busy
	dir := path[:max(strings.LastIndexByte(path, '/'), 0)]
	to, hops, exists, err := r.walk(dir, splitPath(target), 1, rel)
	if err != nil {
		return 0, nil, err
	}
	res := &linkResult{path: to, hops: hops, dangling: !exists}
	switch {
	case exists:
		r.known[path] = res
	case r.danglingBytes+len(to) <= danglingCap:
		// A missing path (its tail lexical) is nobody else's name: what
		// is kept for those is capped.
		r.danglingBytes += len(to)
		r.known[path] = res
	default:
		// Resolved again wherever it is met; the budget bounds that.
		delete(r.known, path)
	}
	return isLink, res, nil
}
