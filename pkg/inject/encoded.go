package inject

import (
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
)

// What apply adds is mostly the same for every review against one catalog
// snapshot: a plugin's sidecar differs only by image (an allowed override) and
// UID, the copy container by UID, a plugin's volumes not at all. Their JSON is
// kept per snapshot so that building the patch does not marshal them again
// (reflection over corev1.Container was a fifth of a small pod's review).
//
// A container is built from the snapshot and a spec alone (copySpec,
// sidecarSpec, socketsSpec), and the spec is its cache key: an input that a
// builder reads has to be a field of its spec, so it is in the key too
// (TestSpecFieldsAreInputs checks that each field changes what is built).

// containerSpec is everything besides the snapshot that one added container
// is built from; comparable, so it is the container's cache key.
type containerSpec interface {
	container(cat *catalog.Catalog) corev1.Container
}

// copySpec builds the copy init container.
type copySpec struct{ uid int64 }

func (s copySpec) container(cat *catalog.Catalog) corev1.Container { return copyContainer(cat, s.uid) }

// sidecarSpec builds one plugin's sidecar: image is the catalog's or the
// pod's allowed override, server the plugin server it runs (server.go).
type sidecarSpec struct {
	plugin, image, server string
	uid                   int64
	native                bool
}

func (s sidecarSpec) container(cat *catalog.Catalog) corev1.Container {
	return sidecar(cat, cat.Plugins[s.plugin], s.image, s.uid, s.native, s.server)
}

// socketsSpec builds the sockets container for a plugin set, in the pod's
// order, joined by commas (plugin names cannot hold one).
type socketsSpec struct {
	plugins string
	uid     int64
	native  bool
}

func (s socketsSpec) container(cat *catalog.Catalog) corev1.Container {
	names := strings.Split(s.plugins, ",")
	entries := make([]*catalog.Entry, len(names))
	for i, n := range names {
		entries[i] = cat.Plugins[n]
	}
	return socketsContainer(cat, entries, s.uid, s.native)
}

// namedKey keys an object that is fixed within a snapshot by its kind and
// name: a volume, a repo-server mount or env var, an inline config.
type namedKey struct{ kind, name string }

// Encodings keeps the JSON of what apply adds, for one catalog snapshot at a
// time: a review against another snapshot starts it afresh. The webhook owns
// one for its life; a nil *Encodings marshals every time (the offline CLI).
type Encodings struct {
	cur atomic.Pointer[encCache]
}

// NewEncodings returns an empty cache.
func NewEncodings() *Encodings { return &Encodings{} }

type encCache struct {
	cat *catalog.Catalog
	m   sync.Map // containerSpec or namedKey → json.RawMessage
	n   atomic.Int32
}

// maxEncoded bounds one snapshot's cache: image overrides come from pods, so
// the keys are not the catalog's alone. Past it, objects are marshalled each time.
const maxEncoded = 4096

// forCatalog is the cache of cat, replacing another snapshot's; nil for a
// nil Encodings.
func (e *Encodings) forCatalog(cat *catalog.Catalog) *encCache {
	if e == nil {
		return nil
	}
	c := e.cur.Load()
	if c == nil || c.cat != cat {
		c = &encCache{cat: cat}
		e.cur.Store(c)
	}
	return c
}

// containerJSON is the JSON of the container spec builds, marshalled once per spec.
func (c *encCache) containerJSON(spec containerSpec, cat *catalog.Catalog) json.RawMessage {
	if b, ok := c.get(spec); ok {
		return b
	}
	return c.put(spec, spec.container(cat))
}

// namedJSON is o's JSON, marshalled once per key. o is a pointer so that a
// hit boxes nothing.
func namedJSON[T any](c *encCache, o *named[T]) json.RawMessage {
	if b, ok := c.get(o.key); ok {
		return b
	}
	return c.put(o.key, &o.value)
}

// get is the JSON cached under key.
func (c *encCache) get(key any) (json.RawMessage, bool) {
	if c == nil {
		return nil, false
	}
	b, ok := c.m.Load(key)
	if !ok {
		return nil, false
	}
	return b.(json.RawMessage), true
}

// put marshals v and keeps it under key, within maxEncoded.
func (c *encCache) put(key, v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		// Kubernetes API types always marshal.
		panic(err)
	}
	if c != nil && c.n.Add(1) <= maxEncoded {
		c.m.Store(key, json.RawMessage(b))
	}
	return b
}
