package cli

import (
	"flag"
	"fmt"
	"os"
	"strconv"

	"github.com/cmp-injector/cmp-injector/cmpserver/rendercache"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// renderCacheFlags registers serve's --render-cache-* flags, each defaulting
// to its env variable (the injector sets those from the catalog). A variable
// that is set but unreadable is an error, not a default: a cache the operator
// asked for must not be silently off, nor one sized by a typo.
func renderCacheFlags(fs *flag.FlagSet, c *rendercache.Config) error {
	size, err := envInt64Strict(keys.EnvRenderCacheSize, 0)
	if err != nil {
		return err
	}
	ttl, err := envDurationStrict(keys.EnvRenderCacheTTL, rendercache.DefaultTTL)
	if err != nil {
		return err
	}
	revision, err := envBoolStrict(keys.EnvRenderCacheRevisionIndependent)
	if err != nil {
		return err
	}
	secrets, err := envBoolStrict(keys.EnvRenderCacheAllowSecrets)
	if err != nil {
		return err
	}
	fs.Int64Var(&c.MaxBytes, "render-cache-size", size, "bytes of GenerateManifest answers kept to answer a repeat (same tree, app path, env and parameters, same plugin.yaml) without running the plugin; only for plugins whose output depends on nothing else (0 = off; env "+keys.EnvRenderCacheSize+")")
	fs.DurationVar(&c.TTL, "render-cache-ttl", ttl, "how long a cached answer may be given (env "+keys.EnvRenderCacheTTL+")")
	fs.BoolVar(&c.RevisionIndependent, "render-cache-revision-independent", revision, "leave the revision env ("+keys.EnvAppRevision+" and its short forms) out of the cache key, so a commit that changes nothing the plugin is sent still hits; only for plugins that never print the revision (env "+keys.EnvRenderCacheRevisionIndependent+")")
	fs.BoolVar(&c.AllowSecrets, "render-cache-allow-secrets", secrets, "allow the cache on a sidecar that takes env from Secrets (env "+keys.EnvRenderCacheAllowSecrets+")")
	return nil
}

func envInt64Strict(name string, def int64) (int64, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%q is not a number of bytes: %w", name, v, err)
	}
	return n, nil
}

func envBoolStrict(name string) (bool, error) {
	v := os.Getenv(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q is not true or false: %w", name, v, err)
	}
	return b, nil
}
