package cmpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/cmp-injector/cmp-injector/cmpserver/command"
	"github.com/cmp-injector/cmp-injector/cmpserver/engine"
	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
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
}

// config is the configuration a request starting now takes.
func (s *Server) config() *loaded { return s.current.Load() }

// ConfigHash is the sha256 (hex) of the plugin.yaml being served, "" when the
// configuration was given in Options.Plugin.
func (s *Server) ConfigHash() string { return s.config().hash }

// install makes c the configuration of new requests.
func (s *Server) install(c *loaded) {
	env := append(append([]string{}, s.opts.Env...), command.LogEnv(s.opts.LogLevel, s.opts.LogFormat)...)
	c.engine = engine.New(c.plugin, s.opts.Limits, s.opts.WorkDir, s.opts.Exec, env, s.log, s.metrics)
	// allowConcurrency: false holds across a reload: a generation started on
	// the old configuration still keeps the next one waiting.
	if old := s.config(); old != nil {
		c.engine.KeepSerial(old.engine)
	}
	s.current.Store(c)
	s.metrics.configLoaded(c.hash)
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

// Reload reads ConfigPath again. It reports whether a new configuration was
// installed; on an error the previous one stays in use.
func (s *Server) Reload() (bool, error) {
	if s.opts.ConfigPath == "" {
		return false, nil
	}
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	old := s.config()
	next, err := readConfig(s.opts.ConfigPath, s.log)
	if err != nil {
		s.metrics.configReloads.WithLabelValues(reloadFailed).Inc()
		s.log.Error("plugin configuration rejected; still serving the previous one",
			zap.String("file", s.opts.ConfigPath), zap.String("config_hash", old.hash), zap.Error(err))
		return false, err
	}
	if next.hash == old.hash {
		return false, nil
	}
	// The new configuration takes requests first, then the socket moves: a
	// request reaching the new name never runs the old commands, and one that
	// reaches the old name in between runs the new ones.
	oldPath := filepath.Join(s.opts.SocketDir, old.plugin.SocketName())
	newPath := filepath.Join(s.opts.SocketDir, next.plugin.SocketName())
	s.install(next)
	if newPath != oldPath && s.served != nil {
		if err := s.listen(newPath); err != nil {
			// Still serving on the old name with the new commands is better
			// than not serving at all; the next change tries again.
			s.metrics.configReloads.WithLabelValues(reloadFailed).Inc()
			s.log.Error("plugin configuration loaded but the socket could not move", zap.String("from", oldPath),
				zap.String("to", newPath), zap.Error(err))
			return true, err
		}
		s.log.Info("plugin socket moved", zap.String("from", oldPath), zap.String("to", newPath))
	}
	s.metrics.configReloads.WithLabelValues(reloadSucceeded).Inc()
	s.log.Info("plugin configuration reloaded", zap.String("file", s.opts.ConfigPath),
		zap.String("previous_hash", old.hash), zap.String("config_hash", next.hash))
	s.logServing(next, newPath)
	return true, nil
}

// Reload results, the values of cmp_server_config_reloads_total's result label.
const (
	reloadSucceeded = "success"
	reloadFailed    = "failure"
)

// watchConfig reloads whenever the file's content changes, until ctx ends.
func (s *Server) watchConfig(ctx context.Context) {
	p := &serving.Poller{
		Interval:    s.opts.ReloadInterval,
		Fingerprint: serving.FileHash(s.opts.ConfigPath),
		OnChange: func(_ string, err error) {
			if err != nil {
				s.metrics.configReloads.WithLabelValues(reloadFailed).Inc()
				s.log.Error("plugin configuration unreadable; still serving the previous one",
					zap.String("file", s.opts.ConfigPath), zap.Error(err))
				return
			}
			_, _ = s.Reload()
		},
	}
	// Not primed: the first check compares the file with what New loaded,
	// so a change between the two is not missed.
	p.Run(ctx)
}
