package unpack

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"time"
)

// Monorepo fan-out: N Applications at one revision send the same tarball (same
// SHA-256, different app paths), once per discovery probe and once per
// generation, and the server unpacked it N times. A plugin whose plugin.yaml
// declares spec.readOnlyRepository: true gets one shared tree per checksum:
//
//   - Every stream is still received to its end and hashed; a tree is used only
//     for a stream whose own SHA-256 matched, and it was unpacked from a stream
//     with that same SHA-256, so the bytes, and the tree, are the same. The
//     preserveFileMode setting is part of the key.
//   - The shared tree is read-only on disk (files without write permission,
//     directories frozen once unpacked), so a plugin that writes anyway fails
//     with "permission denied". That stops mistakes, not a command that
//     chmods the tree writable again (it runs as the tree's owner) or runs as
//     root: so the tree is also sealed once unpacked (seal.go), and checked
//     after every request that used it. A changed tree is dropped at once,
//     and every request that ran on it runs again on a private copy unpacked
//     from the tree's tarball, which is kept for that (the compressed bytes,
//     in an unlinked file), so no answer is ever made from a changed tree.
//   - Each request still has its own request dir, for the server's own files
//     (the command's stdout spool), and cleans it up.
//   - At most maxTrees trees are kept, each until treeTTL after its last use
//     ends; one in use is never removed.
//
// Without the declaration every request gets a fresh tree, as in Argo CD:
// plugins such as `helm dependency build` write into the repository.

const (
	maxTrees = 4
	treeTTL  = 2 * time.Minute
)

type TreeKey struct {
	Checksum     string
	PreserveMode bool
}

type tree struct {
	key  TreeKey
	dir  string
	seal treeSeal
	// tgz is the tarball the tree was unpacked from (unlinked, closed with
	// the tree), to unpack a private copy when the tree was changed.
	tgz     *os.File
	users   int
	lastUse time.Time
	// dropped: the tree was changed and is no longer handed out; it is
	// removed once its last user releases it.
	dropped bool
}

type Trees struct {
	mu sync.Mutex
	m  map[TreeKey]*tree
}

func NewTrees() *Trees { return &Trees{m: map[TreeKey]*tree{}} }

// Lease is one request's use of the shared tree of a key: Dir is the tree,
// Fresh says the holder unpacks it (into a new dir, then Publish) rather than
// finding it ready, and Release ends the use.
type Lease struct {
	trees *Trees
	key   TreeKey
	dir   string
	fresh bool
	// tr is the cached tree in use: the one found, or this lease's once
	// published; nil while a fresh dir is this request's alone.
	tr *tree
	// tgz is the fresh tree's tarball until the cache takes it.
	tgz *os.File
}

// Lease hands out the tree of k, or, when there is none, a new dir from
// newDir for the caller to unpack and Publish.
func (t *Trees) Lease(k TreeKey, newDir func() (string, error)) (*Lease, error) {
	if tr := t.acquire(k); tr != nil {
		return &Lease{trees: t, key: k, dir: tr.dir, tr: tr}, nil
	}
	dir, err := newDir()
	if err != nil {
		return nil, err
	}
	return &Lease{trees: t, key: k, dir: dir, fresh: true}, nil
}

// Dir is the tree's directory.
func (l *Lease) Dir() string { return l.dir }

// Fresh reports whether the holder unpacks the tree.
func (l *Lease) Fresh() bool { return l.fresh }

// Publish seals the fresh tree, complete and unpacked from tgz, and makes it
// the tree of its key (probe is a dir of the holder's where the seal may try
// a file, see sealTree). When it cannot be sealed (the error), or another
// request published one meanwhile, the tree stays the holder's alone,
// removed on Release.
func (l *Lease) Publish(probe string, tgz *os.File) error {
	sl, err := sealTree(l.dir, probe)
	if err != nil {
		l.tgz = tgz
		return err
	}
	if tr, ok := l.trees.add(l.key, l.dir, sl, tgz); ok {
		l.tr = tr
		return nil
	}
	l.tgz = tgz
	return nil
}

// Shared reports whether the lease holds a tree other requests may use, so
// that its seal must be checked after use (Changed).
func (l *Lease) Shared() bool { return l.tr != nil }

// Changed reports how the shared tree was changed since it was sealed, nil
// if it was not (or is not shared). A changed tree is no longer handed out.
func (l *Lease) Changed() error {
	if l.tr == nil {
		return nil
	}
	changed := l.tr.seal.check(l.tr.dir)
	if changed != nil {
		l.trees.drop(l.tr)
	}
	return changed
}

// UnpackCopy unpacks the shared tree's tarball again as to says, as a
// private, writable tree, verifying its checksum again (the unlinked file is
// reachable through /proc by the commands' UID).
func (l *Lease) UnpackCopy(to *Target) error {
	tr := l.tr
	if tr == nil || tr.tgz == nil {
		return errors.New("the shared repository tree was changed and no copy of its tarball is left")
	}
	h := sha256.New()
	r := io.TeeReader(io.NewSectionReader(tr.tgz, 0, math.MaxInt64), h)
	if err := extractTgz(r, to.Dir, to.Limits, to.PreserveMode); err != nil {
		return err
	}
	// The extraction stops at the end of the tar; hash the rest too.
	if _, err := io.Copy(io.Discard, r); err != nil {
		return fmt.Errorf("error reading repository tarball: %w", err)
	}
	if hex.EncodeToString(h.Sum(nil)) != tr.key.Checksum {
		return errors.New("file checksum validation error (the kept copy of the repository tarball was changed)")
	}
	return nil
}

// Release ends the lease: the cached tree's use ends, a dir of the holder's
// alone is removed.
func (l *Lease) Release() {
	if l.tr != nil {
		l.trees.release(l.tr)
	} else if l.fresh {
		removeTree(l.dir)
	}
	if l.tgz != nil {
		l.tgz.Close()
	}
}

// acquire returns the tree for k, in use until release, or nil.
func (t *Trees) acquire(k TreeKey) *tree {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.evictLocked(time.Now())
	tr := t.m[k]
	if tr != nil {
		tr.users++
	}
	return tr
}

// add makes dir, a complete read-only tree for k sealed as sl and unpacked
// from tgz, in use by the caller, the tree of k. It returns false when k
// already has one (another request unpacked the same stream meanwhile): dir
// and tgz then stay the caller's.
func (t *Trees) add(k TreeKey, dir string, sl treeSeal, tgz *os.File) (*tree, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.m[k]; ok {
		return nil, false
	}
	tr := &tree{key: k, dir: dir, seal: sl, tgz: tgz, users: 1}
	t.m[k] = tr
	t.evictLocked(time.Now())
	return tr, true
}

// release ends one use of tr.
func (t *Trees) release(tr *tree) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tr.users--
	tr.lastUse = time.Now()
	if tr.dropped && tr.users == 0 {
		tr.remove()
	}
	t.evictLocked(tr.lastUse)
}

// drop stops handing out tr, which was changed; its users keep it until they
// release it. The next request for its key unpacks a fresh tree.
func (t *Trees) drop(tr *tree) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tr.dropped {
		return
	}
	tr.dropped = true
	if t.m[tr.key] == tr {
		delete(t.m, tr.key)
	}
}

// evictLocked removes unused trees past their TTL, and the least recently
// used unused ones beyond maxTrees.
func (t *Trees) evictLocked(now time.Time) {
	for k, tr := range t.m {
		if tr.users == 0 && now.Sub(tr.lastUse) > treeTTL {
			t.removeLocked(k, tr)
		}
	}
	for len(t.m) > maxTrees {
		var oldK TreeKey
		var old *tree
		for k, tr := range t.m {
			if tr.users == 0 && (old == nil || tr.lastUse.Before(old.lastUse)) {
				oldK, old = k, tr
			}
		}
		if old == nil {
			return // all in use; they go once released
		}
		t.removeLocked(oldK, old)
	}
}

func (t *Trees) removeLocked(k TreeKey, tr *tree) {
	delete(t.m, k)
	tr.remove()
}

func (tr *tree) remove() {
	if tr.tgz != nil {
		tr.tgz.Close()
	}
	removeTree(tr.dir)
}

// RemoveAll removes every unused tree (at shutdown).
func (t *Trees) RemoveAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, tr := range t.m {
		if tr.users == 0 {
			t.removeLocked(k, tr)
		}
	}
}

// removeTree removes a (possibly read-only) tree.
func removeTree(dir string) {
	MakeWritable(dir)
	_ = os.RemoveAll(dir)
}
