// Package publish is the sockets container of an injected pod: every plugin
// sidecar binds its socket in its own directory of the plugins volume (the
// only part of the volume it mounts), and the publisher, which alone mounts
// the whole volume beside the repo-server, hard-links each plugin's socket
// into the volume's root under the plugin's name, where the repo-server lists
// and dials sockets.
//
// Why hard links: Argo CD's discovery keeps only directory entries whose type
// is a socket (os.ReadDir, file.Type() == os.ModeSocket), so a symlink is not
// found, while a hard link is the socket's own inode; a proxy would add a hop
// to every byte of every request. Why a separate container: a plugin's
// commands run with its sidecar's mounts, so whatever may write the root of
// the socket directory can delete, replace or dial every other plugin's
// socket.
//
// Which name a plugin gets is never what its directory says later: it is the
// name its plugin.yaml gives (read from the sidecar's config volume, which its
// commands cannot write), or, for a plugin.yaml baked into the image, the one
// socket its server created before any request could reach it, claimed once
// for the pod's life. A name another plugin holds, or that a live socket the
// publisher did not make holds (a hand-written sidecar's), is refused.
package publish

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
)

// Route is one plugin the publisher serves.
type Route struct {
	// Plugin is the catalog name: its directory is
	// <Root>/keys.PrivateSocketSubPath(Plugin).
	Plugin string
	// Config is the plugin.yaml to take the socket name from; "" for one
	// baked into the plugin's image, whose first socket is claimed.
	Config string
}

// CheckPluginName refuses a plugin name that is not one path element.
func CheckPluginName(name string) error {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return fmt.Errorf("%q is not a plugin's catalog name", name)
	}
	return nil
}

// Publisher keeps every route's socket published in Root.
type Publisher struct {
	Root   string
	Routes []Route
	Log    *zap.Logger

	state map[string]*routeState
}

type routeState struct {
	// name and ino are what was last published for the route.
	name string
	ino  uint64
	// configName is the name the route's plugin.yaml gave when it was last
	// readable: a plugin.yaml that stops decoding keeps the server on its
	// previous configuration, and the publisher on its previous name.
	configName string
	// said holds the last message logged per kind, so a condition that
	// lasts is logged once, not on every tick.
	said map[string]string
}

// interval is how often Run looks again.
const interval = 100 * time.Millisecond

// Run publishes every interval until ctx ends.
func (p *Publisher) Run(ctx context.Context) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		p.Tick()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Tick looks once at every route and publishes what changed. It returns the
// routes whose socket is not published now, each with why.
func (p *Publisher) Tick() map[string]string {
	if p.state == nil {
		p.state = map[string]*routeState{}
	}
	if p.Log == nil {
		p.Log = zap.NewNop()
	}
	missing := map[string]string{}
	holders := map[string]string{} // published name → plugin, this tick
	for _, r := range p.Routes {
		st := p.state[r.Plugin]
		if st == nil {
			st = &routeState{said: map[string]string{}}
			p.state[r.Plugin] = st
		}
		name, err := p.wantName(r, st)
		if err == nil {
			if other, taken := holders[name]; taken {
				err = fmt.Errorf("socket name %s is plugin %s's; two plugins cannot have one name", name, other)
			} else {
				holders[name] = r.Plugin
				err = p.publish(r, st, name)
			}
		}
		if err != nil {
			missing[r.Plugin] = err.Error()
			p.say(st, "problem", err.Error(), func() {
				p.Log.Warn("plugin socket not published", zap.String("plugin", r.Plugin), zap.Error(err))
			})
			continue
		}
		p.say(st, "problem", "", nil)
	}
	return missing
}

// say runs log when msg differs from the last message of kind.
func (p *Publisher) say(st *routeState, kind, msg string, log func()) {
	if st.said[kind] == msg {
		return
	}
	st.said[kind] = msg
	if log != nil {
		log()
	}
}

// PluginDir is where route r's sidecar binds its socket.
func (p *Publisher) PluginDir(r Route) string {
	return filepath.Join(p.Root, keys.PrivateSocketSubPath(r.Plugin))
}

// wantName is the socket name route r is published under.
func (p *Publisher) wantName(r Route, st *routeState) (string, error) {
	if r.Config != "" {
		name, err := configName(r.Config)
		if err != nil {
			if st.configName == "" {
				return "", err
			}
			p.say(st, "config", err.Error(), func() {
				p.Log.Warn("plugin.yaml unreadable; the previous socket name stays", zap.String("plugin", r.Plugin),
					zap.String("socket", st.configName), zap.Error(err))
			})
			return st.configName, nil
		}
		p.say(st, "config", "", nil)
		st.configName = name
		return name, nil
	}
	return p.claim(r)
}

// configName is the socket name the plugin.yaml at path gives.
func configName(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("plugin.yaml: %w", err)
	}
	pl, _, err := pluginconfig.Decode(data)
	if err != nil {
		return "", fmt.Errorf("plugin.yaml: %w", err)
	}
	name := pl.SocketName()
	return name, plainName(name)
}

// readClaim is the socket name recorded for route r, if one is.
func (p *Publisher) readClaim(r Route) (name string, found bool, err error) {
	b, err := os.ReadFile(filepath.Join(p.Root, keys.PrivateClaims, r.Plugin))
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	name = strings.TrimSpace(string(b))
	return name, true, plainName(name)
}

// plainName refuses a socket name that is not one file of the socket dir.
func plainName(name string) error {
	if name == "" || filepath.Base(name) != name || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".sock") {
		return fmt.Errorf("socket name %q is not a file name ending in .sock", name)
	}
	return nil
}

// claim is the socket name of an image-configured plugin: recorded once in
// the claims directory, from the only socket its directory held then. The
// record lives in the volume, so a restarted publisher keeps it.
func (p *Publisher) claim(r Route) (string, error) {
	if name, found, err := p.readClaim(r); found || err != nil {
		return name, err
	}
	file := filepath.Join(p.Root, keys.PrivateClaims, r.Plugin)
	entries, err := os.ReadDir(p.PluginDir(r))
	if err != nil {
		return "", fmt.Errorf("no socket yet: %w", err)
	}
	var socks []string
	for _, e := range entries {
		if e.Type() == os.ModeSocket {
			socks = append(socks, e.Name())
		}
	}
	sort.Strings(socks)
	switch len(socks) {
	case 0:
		return "", fmt.Errorf("no socket yet in %s", p.PluginDir(r))
	case 1:
	default:
		return "", fmt.Errorf("%s holds sockets %s before any was claimed; its server makes one", p.PluginDir(r), strings.Join(socks, ", "))
	}
	if err := plainName(socks[0]); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return "", err
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return p.claim(r)
		}
		return "", err
	}
	_, werr := f.WriteString(socks[0] + "\n")
	if err := errors.Join(werr, f.Close()); err != nil {
		return "", err
	}
	p.Log.Info("plugin socket name claimed", zap.String("plugin", r.Plugin), zap.String("socket", socks[0]))
	return socks[0], nil
}

// publish makes <Root>/name the inode of the route's own socket.
func (p *Publisher) publish(r Route, st *routeState, name string) error {
	src := filepath.Join(p.PluginDir(r), name)
	ino, err := socketInode(src)
	if err != nil {
		return err
	}
	dst := filepath.Join(p.Root, name)
	have, err := socketInode(dst)
	switch {
	case err == nil && have == ino:
		p.settle(r, st, name, ino)
		return nil
	case err == nil && !(st.name == name && st.ino == have) && answers(dst):
		// A live socket the publisher did not put there: a hand-written
		// sidecar's, or a server of another pod's volume. Never taken over.
		return fmt.Errorf("%s is a socket another server listens on; rename the plugin or that server", dst)
	case errors.Is(err, errNotSocket):
		return fmt.Errorf("%s exists and is not a socket; it is left alone", dst)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return err
	}
	// Link beside the target and check what was linked before it takes the
	// name: the sidecar can swap its own file between the Lstat above and the
	// link, and a hard link of a symlink would point the repo-server anywhere.
	tmp := filepath.Join(p.Root, keys.PrivateSocketsDir, fmt.Sprintf(".link-%d-%s", os.Getpid(), r.Plugin))
	_ = os.Remove(tmp)
	if err := os.Link(src, tmp); err != nil {
		return fmt.Errorf("linking %s: %w", src, err)
	}
	if got, err := socketInode(tmp); err != nil || got != ino {
		_ = os.Remove(tmp)
		return fmt.Errorf("%s changed while it was linked; trying again", src)
	}
	if err := os.Rename(tmp, dst); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("publishing %s: %w", dst, err)
	}
	p.Log.Info("plugin socket published", zap.String("plugin", r.Plugin), zap.String("socket", dst), zap.Uint64("inode", ino))
	p.settle(r, st, name, ino)
	return nil
}

// settle records what is published and removes the route's previous name
// when its plugin.yaml renamed it, if that name is still the publisher's.
func (p *Publisher) settle(r Route, st *routeState, name string, ino uint64) {
	if st.name != "" && st.name != name {
		old := filepath.Join(p.Root, st.name)
		if have, err := socketInode(old); err == nil && have == st.ino {
			_ = os.Remove(old)
			p.Log.Info("plugin socket renamed", zap.String("plugin", r.Plugin), zap.String("from", st.name), zap.String("to", name))
		}
	}
	st.name, st.ino = name, ino
}

var errNotSocket = errors.New("not a socket")

// socketInode is the inode of the socket at path, without following a link.
func socketInode(path string) (uint64, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0, err
	}
	if fi.Mode().Type() != os.ModeSocket {
		return 0, fmt.Errorf("%s: %w", path, errNotSocket)
	}
	sys, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("%s: no inode", path)
	}
	return sys.Ino, nil
}

// answers reports whether something accepts connections on the socket at path.
func answers(path string) bool {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// Check reports, without changing anything, the routes whose published
// socket is missing or does not answer: the postStart hook's question, asked
// from a second process beside Run.
func (p *Publisher) Check() map[string]string {
	missing := map[string]string{}
	for _, r := range p.Routes {
		var name string
		var err error
		if r.Config != "" {
			name, err = configName(r.Config)
		} else {
			var found bool
			if name, found, err = p.readClaim(r); err == nil && !found {
				err = errors.New("no socket claimed yet")
			}
		}
		if err != nil {
			missing[r.Plugin] = err.Error()
			continue
		}
		src, dst := filepath.Join(p.PluginDir(r), name), filepath.Join(p.Root, name)
		want, err := socketInode(src)
		if err != nil {
			missing[r.Plugin] = fmt.Sprintf("its server has no socket yet: %v", err)
			continue
		}
		if have, err := socketInode(dst); err != nil || have != want {
			missing[r.Plugin] = fmt.Sprintf("%s is not published yet", dst)
			continue
		}
		if !answers(dst) {
			missing[r.Plugin] = fmt.Sprintf("%s does not answer", dst)
		}
	}
	return missing
}

// Describe renders a map of route problems, sorted, for one error line.
func Describe(missing map[string]string) string {
	names := slices.Sorted(maps.Keys(missing))
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("plugin %s: %s", n, missing[n])
	}
	return strings.Join(parts, "; ")
}
