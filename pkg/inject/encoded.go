package inject

import (
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
)

// What apply adds is mostly the same for every review against one catalog
// snapshot: a plugin's sidecar differs only by image (an allowed override) and
// UID, the copy container by UID, a plugin's volumes not at all. Their JSON is
// kept per snapshot so that building the patch does not marshal them again
// (reflection over corev1.Container was a fifth of a small pod's review).

// encKey names one encoded object of a catalog snapshot.
type encKey struct {
	kind, name, image string
	uid               int64
	native            bool
}

type encCache struct {
	cat *catalog.Catalog
	m   sync.Map // encKey → json.RawMessage
	n   atomic.Int32
}

// maxEncoded bounds one snapshot's cache: image overrides come from pods, so
// the keys are not the catalog's alone. Past it, objects are marshalled each time.
const maxEncoded = 4096

var encoded atomic.Pointer[encCache]

// encodedFor is the cache of cat, replacing another snapshot's.
func encodedFor(cat *catalog.Catalog) *encCache {
	c := encoded.Load()
	if c == nil || c.cat != cat {
		c = &encCache{cat: cat}
		encoded.Store(c)
	}
	return c
}

// json returns v's JSON, marshalled once per key; v must be what key names.
func (c *encCache) json(key encKey, v any) json.RawMessage {
	return c.jsonOf(key, func() any { return v })
}

// jsonOf is json for a value built only when key is not cached yet.
func (c *encCache) jsonOf(key encKey, build func() any) json.RawMessage {
	if b, ok := c.m.Load(key); ok {
		return b.(json.RawMessage)
	}
	b, err := json.Marshal(build())
	if err != nil {
		// Kubernetes API types always marshal.
		panic(err)
	}
	if c.n.Add(1) <= maxEncoded {
		c.m.Store(key, json.RawMessage(b))
	}
	return b
}
