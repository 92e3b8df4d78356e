package rendercache

import (
	"strings"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/cmpserver/pluginpb"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

type counts struct {
	hits, misses int
	evicted      map[string]int
	entries      int
	bytes        int64
}

func (c *counts) Lookup(hit bool) {
	if hit {
		c.hits++
	} else {
		c.misses++
	}
}
func (c *counts) Evicted(reason string)         { c.evicted[reason]++ }
func (c *counts) Held(entries int, bytes int64) { c.entries, c.bytes = entries, bytes }

func newTest(t *testing.T, cfg Config) (*Cache[string], *counts, *time.Time) {
	t.Helper()
	obs := &counts{evicted: map[string]int{}}
	c := New[string](cfg, "config", obs)
	now := time.Unix(1_800_000_000, 0)
	c.now = func() time.Time { return now }
	return c, obs, &now
}

func meta(app, sum string, env ...string) *pluginpb.ManifestRequestMetadata {
	m := &pluginpb.ManifestRequestMetadata{AppRelPath: app, Checksum: sum, Size: 10}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m.Env = append(m.Env, &pluginpb.EnvEntry{Name: k, Value: v})
	}
	return m
}

func TestOffWhenNotSized(t *testing.T) {
	if New[string](Config{}, "x", nil) != nil {
		t.Fatal("a cache of 0 bytes was made")
	}
	var c *Cache[string]
	c.Drop() // a nil cache is dropped without a panic
}

// TestKeyCoversWhatThePluginReads: every part of the request a command can
// read changes the key; the env's order does not.
func TestKeyCoversWhatThePluginReads(t *testing.T) {
	c, _, _ := newTest(t, Config{MaxBytes: 100, TTL: time.Minute})
	key := func(m *pluginpb.ManifestRequestMetadata) Key {
		k, ok := c.KeyOf(m)
		if !ok {
			t.Fatal("no key")
		}
		return k
	}
	base := key(meta("app", "sum", "A=1", "B=2", keys.EnvAppRevision+"=r1"))
	if key(meta("app", "sum", "B=2", keys.EnvAppRevision+"=r1", "A=1")) != base {
		t.Error("the env's order changed the key")
	}
	for name, m := range map[string]*pluginpb.ManifestRequestMetadata{
		"checksum": meta("app", "sum2", "A=1", "B=2", keys.EnvAppRevision+"=r1"),
		"app path": meta("app2", "sum", "A=1", "B=2", keys.EnvAppRevision+"=r1"),
		"a value":  meta("app", "sum", "A=1", "B=3", keys.EnvAppRevision+"=r1"),
		"a name":   meta("app", "sum", "A=1", "C=2", keys.EnvAppRevision+"=r1"),
		"one more": meta("app", "sum", "A=1", "B=2", "D=", keys.EnvAppRevision+"=r1"),
		"revision": meta("app", "sum", "A=1", "B=2", keys.EnvAppRevision+"=r2"),
		// Field boundaries: "A=1B" and "=2" must not read as "A=1" "B=2".
		"boundary": meta("app", "sum", "A=1B", "=2", keys.EnvAppRevision+"=r1"),
	} {
		if key(m) == base {
			t.Errorf("a changed %s kept the key", name)
		}
	}
	other := New[string](Config{MaxBytes: 100, TTL: time.Minute}, "another config", &counts{evicted: map[string]int{}})
	if k, _ := other.KeyOf(meta("app", "sum", "A=1", "B=2", keys.EnvAppRevision+"=r1")); k == base {
		t.Error("another configuration made the same key")
	}
	if _, ok := c.KeyOf(meta("app", "")); ok {
		t.Error("a header without a checksum was keyed")
	}

	indep, _, _ := newTest(t, Config{MaxBytes: 100, TTL: time.Minute, RevisionIndependent: true})
	a, _ := indep.KeyOf(meta("app", "sum", keys.EnvAppRevision+"=r1", keys.EnvAppRevisionShort+"=r", keys.EnvAppRevisionShort8+"=r1", "A=1"))
	b, _ := indep.KeyOf(meta("app", "sum", keys.EnvAppRevision+"=r2", keys.EnvAppRevisionShort+"=s", keys.EnvAppRevisionShort8+"=r2", "A=1"))
	if a != b {
		t.Error("RevisionIndependent kept the revision in the key")
	}
	if d, _ := indep.KeyOf(meta("app", "sum", keys.EnvAppRevision+"=r1", "A=2")); d == a {
		t.Error("RevisionIndependent left another variable out")
	}
}

// TestBoundedBySizeLeastRecentlyUsedFirst: the oldest unused answer goes
// first; a large answer is not kept at all.
func TestBoundedBySizeLeastRecentlyUsedFirst(t *testing.T) {
	c, obs, _ := newTest(t, Config{MaxBytes: 100, TTL: time.Minute})
	k := func(s string) Key { k, _ := c.KeyOf(meta("app", s)); return k }
	c.Put(k("a"), "A", 25)
	c.Put(k("b"), "B", 25)
	c.Put(k("c"), "C", 25)
	c.Put(k("d"), "D", 25)
	if _, ok := c.Get(k("a")); !ok { // a is now the most recent
		t.Fatal("a missing")
	}
	c.Put(k("e"), "E", 25) // evicts b, the least recently used
	if _, ok := c.Get(k("b")); ok {
		t.Error("b kept: not least recently used first")
	}
	for _, s := range []string{"a", "c", "d", "e"} {
		if v, ok := c.Get(k(s)); !ok || v != strings.ToUpper(s) {
			t.Errorf("%s: %q %v", s, v, ok)
		}
	}
	if obs.evicted[EvictedSize] != 1 || obs.entries != 4 || obs.bytes != 100 {
		t.Errorf("observed %+v", obs)
	}
	c.Put(k("huge"), "H", 26) // more than MaxBytes / maxEntryShare
	if _, ok := c.Get(k("huge")); ok {
		t.Error("an answer over a quarter of the cache was kept")
	}
	if obs.entries != 4 {
		t.Errorf("entries %d", obs.entries)
	}
	c.Put(k("a"), "A2", 10) // replacing keeps the accounting right
	if obs.bytes != 85 {
		t.Errorf("bytes after a replacement %d, want 85", obs.bytes)
	}
}

func TestExpires(t *testing.T) {
	c, obs, now := newTest(t, Config{MaxBytes: 100, TTL: time.Minute})
	k, _ := c.KeyOf(meta("app", "a"))
	c.Put(k, "A", 10)
	*now = now.Add(time.Minute)
	if _, ok := c.Get(k); !ok {
		t.Fatal("expired at its TTL, not after it")
	}
	*now = now.Add(time.Second)
	if _, ok := c.Get(k); ok {
		t.Fatal("an expired answer was given")
	}
	if obs.evicted[EvictedExpired] != 1 || obs.entries != 0 || obs.bytes != 0 || obs.hits != 1 || obs.misses != 1 {
		t.Errorf("observed %+v", obs)
	}
}

func TestDropKeepsNothingMore(t *testing.T) {
	c, obs, _ := newTest(t, Config{MaxBytes: 100, TTL: time.Minute})
	k, _ := c.KeyOf(meta("app", "a"))
	c.Put(k, "A", 10)
	c.Drop()
	c.Put(k, "A", 10) // a request still running on the old configuration
	if _, ok := c.Get(k); ok || obs.entries != 0 {
		t.Fatalf("a dropped cache answered or kept: %+v", obs)
	}
}

func TestProblems(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{MaxBytes: -1}, "--render-cache-size must not be negative"},
		{Config{MaxBytes: 1}, "--render-cache-ttl must be more than 0"},
	} {
		ps := tc.cfg.Problems()
		if len(ps) != 1 || !strings.Contains(ps[0].Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, ps, tc.want)
		}
	}
	if ps := (Config{}).Problems(); len(ps) != 0 {
		t.Errorf("off: %v", ps)
	}
}
