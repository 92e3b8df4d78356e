package cmpserver

import (
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

type treeKey struct {
	checksum     string
	preserveMode bool
}

type tree struct {
	key  treeKey
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

type trees struct {
	mu sync.Mutex
	m  map[treeKey]*tree
}

func newTrees() *trees { return &trees{m: map[treeKey]*tree{}} }

// treeLease is one request's use of the shared tree of a key: dir is the
// tree, fresh says the holder unpacks it (into a new dir, then publish) rather
// than finding it ready, and release ends the use.
type treeLease struct {
	trees *trees
	key   treeKey
	dir   string
	fresh bool
	// tr is the cached tree in use: the one found, or this lease's once
	// published; nil while a fresh dir is this request's alone.
	tr *tree
	// tgz is the fresh tree's tarball until the cache takes it.
	tgz *os.File
}

// lease hands out the tree of k, or, when there is none, a new dir from
// newDir for the caller to unpack and publish.
func (t *trees) lease(k treeKey, newDir func() (string, error)) (*treeLease, error) {
	if tr := t.acquire(k); tr != nil {
		return &treeLease{trees: t, key: k, dir: tr.dir, tr: tr}, nil
	}
	dir, err := newDir()
	if err != nil {
		return nil, err
	}
	return &treeLease{trees: t, key: k, dir: dir, fresh: true}, nil
}

// publish makes the fresh tree, complete and sealed as sl, unpacked from
// tgz, the tree of its key. When another request published one meanwhile, it
// stays this request's alone, removed on release.
func (l *treeLease) publish(sl treeSeal, tgz *os.File) {
	if tr, ok := l.trees.add(l.key, l.dir, sl, tgz); ok {
		l.tr = tr
		return
	}
	l.tgz = tgz
}

// shared is the cached tree in use, nil when the lease's dir is the holder's
// alone.
func (l *treeLease) shared() *tree { return l.tr }

// release ends the lease: the cached tree's use ends, a dir of the holder's
// alone is removed.
func (l *treeLease) release() {
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
func (t *trees) acquire(k treeKey) *tree {
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
func (t *trees) add(k treeKey, dir string, sl treeSeal, tgz *os.File) (*tree, bool) {
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
func (t *trees) release(tr *tree) {
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
func (t *trees) drop(tr *tree) {
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
func (t *trees) evictLocked(now time.Time) {
	for k, tr := range t.m {
		if tr.users == 0 && now.Sub(tr.lastUse) > treeTTL {
			t.removeLocked(k, tr)
		}
	}
	for len(t.m) > maxTrees {
		var oldK treeKey
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

func (t *trees) removeLocked(k treeKey, tr *tree) {
	delete(t.m, k)
	tr.remove()
}

func (tr *tree) remove() {
	if tr.tgz != nil {
		tr.tgz.Close()
	}
	removeTree(tr.dir)
}

// removeAll removes every unused tree (at shutdown).
func (t *trees) removeAll() {
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
	makeWritable(dir)
	_ = os.RemoveAll(dir)
}
