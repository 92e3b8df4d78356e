// Package rendercache keeps what a deterministic plugin generated, keyed by
// everything its commands can read from the request, so that a repeat (the
// same tree, env and parameters under the same plugin.yaml) is answered
// without running them.
//
// It is off unless the operator turns it on (the catalog's renderCache, or
// cmp-server's --render-cache-size): only the operator knows that a plugin's
// output is a function of its inputs. A plugin that reads the network (a
// chart repository, a Vault, git) or the clock is not, and a cached answer
// would hide a change there until the entry expires (Config.TTL bounds that).
//
// The key is a SHA-256 over:
//   - the configuration's identity (the sha256 of its plugin.yaml; a cache
//     belongs to one loaded configuration and a reload starts a new one);
//   - the tarball's checksum as the repo-server sent it in the header: the
//     SHA-256 of the compressed stream, which covers every path, mode, link and
//     byte of the tree. The server checks it against the stream it receives
//     before any answer is sent, cached or not, so a key is never made from
//     bytes that did not arrive;
//   - the app's path in the tree;
//   - the request env (the build env Argo CD sets, ARGOCD_APP_PARAMETERS and
//     every ARGOCD_ENV_ variable), by name, sorted, except the names
//     Config.IgnoreEnv leaves out.
//
// Entries live in memory only (a plugin's output can hold values it read
// from its inputs; nothing is written to the sidecar's disk), bounded by
// Config.MaxBytes (least recently used first out) and by Config.TTL.
package rendercache

import (
	"cmp"
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"slices"
	"sync"
	"time"

	"github.com/cmp-injector/cmp-injector/cmpserver/pluginpb"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// Config is the cache's size and what it leaves out of the key.
type Config struct {
	// MaxBytes bounds the answers held; 0 turns the cache off.
	MaxBytes int64
	// TTL is how long an answer may be given after it was made.
	TTL time.Duration
	// RevisionIndependent leaves the revision env (ARGOCD_APP_REVISION and
	// its short forms) out of the key: a commit that changes nothing the
	// plugin is sent (e.g. a file outside every app's manifest-generate-paths)
	// then hits. Only for plugins whose output never contains the revision.
	RevisionIndependent bool
	// AllowSecrets keeps the cache on for a sidecar that takes env from
	// Secrets: a rotated Secret then reaches the output only when the entry
	// expires, and answers holding Secret values stay in memory. The server
	// refuses the cache on such a sidecar without it.
	AllowSecrets bool
}

// Defaults when the cache is on.
const (
	DefaultTTL = 10 * time.Minute
	// maxEntryShare: one answer may take at most this share of MaxBytes, so
	// that a huge render cannot flush every other app's.
	maxEntryShare = 4
)

// revisionEnv are the names RevisionIndependent leaves out of the key.
var revisionEnv = []string{keys.EnvAppRevision, keys.EnvAppRevisionShort, keys.EnvAppRevisionShort8}

// Enabled says whether c turns the cache on.
func (c Config) Enabled() bool { return c.MaxBytes > 0 }

// Problems are what makes c unusable, each naming its flag.
func (c Config) Problems() []error {
	var errs []error
	if c.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("--render-cache-size must not be negative, got %d", c.MaxBytes))
	}
	if c.Enabled() && c.TTL <= 0 {
		errs = append(errs, fmt.Errorf("--render-cache-ttl must be more than 0 when the render cache is on, got %s", c.TTL))
	}
	return errs
}

// Key identifies one answer (see the package comment).
type Key [sha256.Size]byte

// observer is told of every lookup and of what the cache holds (the server's
// metrics).
type observer interface {
	Lookup(hit bool)
	Evicted(reason string)
	Held(entries int, bytes int64)
}

// Eviction reasons, the values of observer.Evicted.
const (
	EvictedSize    = "size"
	EvictedExpired = "expired"
)

// Cache holds answers of type V for one loaded configuration. It is safe for
// concurrent use.
type Cache[V any] struct {
	cfg      Config
	configID string
	obs      observer
	now      func() time.Time

	mu    sync.Mutex
	items map[Key]*list.Element
	lru   *list.List // front: most recently used
	bytes int64
	// dropped: the configuration was replaced; nothing more is kept.
	dropped bool
}

type entry[V any] struct {
	key     Key
	value   V
	size    int64
	expires time.Time
}

// New is an empty cache for the configuration configID, or nil when cfg
// leaves it off (a nil cache misses nothing: callers check Enabled first).
func New[V any](cfg Config, configID string, obs observer) *Cache[V] {
	if !cfg.Enabled() {
		return nil
	}
	return &Cache[V]{cfg: cfg, configID: configID, obs: obs, now: time.Now, items: map[Key]*list.Element{}, lru: list.New()}
}

// KeyOf is meta's key; ok is false when meta carries no checksum (nothing
// then identifies the tree, and the request is not cached).
func (c *Cache[V]) KeyOf(meta *pluginpb.ManifestRequestMetadata) (k Key, ok bool) {
	if meta.GetChecksum() == "" {
		return k, false
	}
	h := sha256.New()
	field(h, "config", c.configID)
	field(h, "checksum", meta.GetChecksum())
	field(h, "app", meta.GetAppRelPath())
	env := make([]*pluginpb.EnvEntry, 0, len(meta.GetEnv()))
	for _, e := range meta.GetEnv() {
		if c.cfg.RevisionIndependent && slices.Contains(revisionEnv, e.GetName()) {
			continue
		}
		env = append(env, e)
	}
	// The repo-server's order is not part of what a command sees.
	slices.SortStableFunc(env, func(a, b *pluginpb.EnvEntry) int { return cmp.Compare(a.GetName(), b.GetName()) })
	for _, e := range env {
		field(h, "env", e.GetName())
		field(h, "=", e.GetValue())
	}
	copy(k[:], h.Sum(nil))
	return k, true
}

// field writes a tag and a length-prefixed value, so that no two different
// sequences of fields hash alike.
func field(h hash.Hash, tag, v string) {
	var n [binary.MaxVarintLen64]byte
	h.Write([]byte(tag))
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(v)))])
	h.Write([]byte(v))
}

// Get is k's answer, if held and not expired.
func (c *Cache[V]) Get(k Key) (V, bool) {
	var zero V
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[k]
	if ok && c.now().After(el.Value.(*entry[V]).expires) {
		c.removeLocked(el)
		c.obs.Evicted(EvictedExpired)
		c.heldLocked()
		ok = false
	}
	c.obs.Lookup(ok)
	if !ok {
		return zero, false
	}
	c.lru.MoveToFront(el)
	return el.Value.(*entry[V]).value, true
}

// Put keeps v (size bytes) as k's answer, evicting the least recently used
// answers to stay within MaxBytes. An answer larger than MaxBytes /
// maxEntryShare is not kept.
func (c *Cache[V]) Put(k Key, v V, size int64) {
	if size > c.cfg.MaxBytes/maxEntryShare {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped {
		return
	}
	if el, ok := c.items[k]; ok {
		c.removeLocked(el)
	}
	now := c.now()
	for c.bytes+size > c.cfg.MaxBytes {
		oldest := c.lru.Back()
		reason := EvictedSize
		if now.After(oldest.Value.(*entry[V]).expires) {
			reason = EvictedExpired
		}
		c.removeLocked(oldest)
		c.obs.Evicted(reason)
	}
	c.items[k] = c.lru.PushFront(&entry[V]{key: k, value: v, size: size, expires: now.Add(c.cfg.TTL)})
	c.bytes += size
	c.heldLocked()
}

func (c *Cache[V]) removeLocked(el *list.Element) {
	e := el.Value.(*entry[V])
	c.lru.Remove(el)
	delete(c.items, e.key)
	c.bytes -= e.size
}

func (c *Cache[V]) heldLocked() { c.obs.Held(c.lru.Len(), c.bytes) }

// Drop empties c for good: its configuration is no longer served (requests
// still running on it keep nothing).
func (c *Cache[V]) Drop() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropped = true
	c.items = map[Key]*list.Element{}
	c.lru.Init()
	c.bytes = 0
	c.heldLocked()
}
