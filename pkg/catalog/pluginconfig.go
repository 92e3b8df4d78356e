package catalog

import (
	"errors"
	"strings"

	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
)

// parsePluginConfig judges an inline config with the plugin server's own
// parser. The server merely warns about unknown keys and ignored discovery
// rules; the catalog is admin-owned and strict, so here they are errors: a
// typo would otherwise reach every repo-server pod.
func parsePluginConfig(y []byte) (*pluginconfig.Plugin, error) {
	pl, warnings, err := pluginconfig.Parse(y)
	if err != nil {
		return nil, err
	}
	msgs := warnings
	if err := pl.Validate(); err != nil {
		msgs = append(msgs, err.Error())
	}
	if len(msgs) > 0 {
		return nil, errors.New(strings.Join(msgs, "; "))
	}
	return pl, nil
}

func socketName(pl *pluginconfig.Plugin) string { return pl.SocketName() }
