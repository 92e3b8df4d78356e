package cmpserver

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/cmp-injector/cmp-injector/cmpserver/engine"
	"github.com/cmp-injector/cmp-injector/cmpserver/rendercache"
	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
)

// A sidecar's plugin.yaml is projected from a pod annotation (or mounted from
// a ConfigMap), and the kubelet rewrites it in the running container when the
// source changes. The server picks the change up without a restart: a valid
// new file serves every request that starts after it is read, requests in
// flight finish with the configuration they started with, and an invalid file
// is reported and ignored, so a typo in the catalog never takes a plugin down.

// loaded is one plugin configuration with the engine that runs it. It is
// immutable once installed.
type loaded struct {
	plugin *pluginconfig.Plugin
	engine *engine.Engine
	// hash is the sha256 of the plugin.yaml bytes, "" for a configuration
	// given in Options.Plugin.
	hash string
	// cache holds this configuration's answers (nil: off); a reload starts
	// an empty one.
	cache *rendercache.Cache[*encodedManifests]
}

// configs holds the configuration new requests take; a request keeps the
// one it took until it ends.
type configs struct {
	current atomic.Pointer[loaded]
	// newEngine runs a configuration's plugin with the server's options.
	newEngine func(*pluginconfig.Plugin) *engine.Engine
	metrics   *metrics
	// renderCache is Options.RenderCache, made anew for each configuration.
	renderCache rendercache.Config
	log         *zap.Logger
}

// get is the configuration a request starting now takes.
func (c *configs) get() *loaded { return c.current.Load() }

// install makes l the configuration of new requests.
func (c *configs) install(l *loaded) {
	l.engine = c.newEngine(l.plugin)
	l.cache = rendercache.New[*encodedManifests](c.renderCache, l.hash, cacheObserver{c.metrics})
	if l.cache != nil && l.plugin.Spec.ProvideGitCreds {
		// The repo-server sends a fresh askpass nonce with every request of
		// such a plugin, so no key would repeat; and a plugin that fetches
		// with the user's git credentials reads more than its tree.
		c.log.Warn("the render cache is off for this configuration: it sets provideGitCreds")
		l.cache = nil
	}
	// allowConcurrency: false holds across a reload: a generation started on
	// the old configuration still keeps the next one waiting.
	old := c.get()
	if old != nil {
		l.engine.KeepSerial(old.engine)
	}
	c.current.Store(l)
	if old != nil {
		old.cache.Drop()
	}
	c.metrics.configLoaded(l.hash)
}

// readConfig loads and validates a plugin.yaml, logging its warnings.
func readConfig(path string, log *zap.Logger) (*loaded, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading plugin configuration: %w", err)
	}
	p, warnings, err := pluginconfig.Decode(data)
	for _, w := range warnings {
		log.Warn("plugin configuration: "+w, zap.String("file", path))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sum := sha256.Sum256(data)
	return &loaded{plugin: p, hash: hex.EncodeToString(sum[:])}, nil
}
