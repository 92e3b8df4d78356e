package inject

import (
	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// Where a sidecar's plugin server comes from. By default the copy init
// container copies cmp-server from the catalog's copy image into var-files,
// and every sidecar runs that copy (keys.PluginServerPath) read-only: its
// start gate, git's askpass program and any plugin command naming that path
// are the same binary. A catalog entry with serverPath says its image carries
// cmp-server already (the library's images do); when every plugin of a pod
// has one, the pod gets neither the copy init container nor var-files (unless
// it has its own), and each sidecar runs, and gates on, its image's server.
// The server resolves its own path for the rest (os.Executable: the askpass
// link, a command whose argv[0] is keys.PluginServerPath). The sockets
// container runs the copy image in either case: it is not a copy.
//
// The decision reads the catalog only: a pod can neither ask for nor refuse
// the copy. A pod with one plugin whose entry has no serverPath keeps the copy
// for all its sidecars, exactly as before the field existed.

// serverChoice decides the plugin server of a pod whose plugins are entries.
func serverChoice(entries []*catalog.Entry) *ServerChoice {
	c := &ServerChoice{Source: ServerFromImages}
	for _, e := range entries {
		if e.ServerPath == "" {
			c.WithoutServerPath = append(c.WithoutServerPath, e.Name)
		}
	}
	if len(entries) == 0 || len(c.WithoutServerPath) > 0 {
		c.Source = ServerCopied
	}
	return c
}

// serverPath is the executable e's sidecar runs under choice: the copy, or
// the one its image carries.
func (s *ServerChoice) serverPath(e *catalog.Entry) string {
	if s.Copies() {
		return keys.PluginServerPath
	}
	return e.ServerPath
}

// catalogEntries are the catalog's entries for plugins, skipping names it
// does not have (reported elsewhere).
func catalogEntries(cat *catalog.Catalog, plugins []string) []*catalog.Entry {
	var out []*catalog.Entry
	for _, p := range plugins {
		if e := cat.Plugins[p]; e != nil {
			out = append(out, e)
		}
	}
	return out
}
