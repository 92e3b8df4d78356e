package publish

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// listen binds a socket at path that answers "name" to every connection, as
// a plugin server stands in.
func listen(t *testing.T, path, name string) net.Listener {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(name))
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// who dials path and returns what answered.
func who(t *testing.T, path string) string {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		return "dial: " + err.Error()
	}
	defer c.Close()
	b := make([]byte, 64)
	n, _ := c.Read(b)
	return string(b[:n])
}

func config(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(p, []byte("apiVersion: argoproj.io/v1alpha1\nkind: ConfigManagementPlugin\nmetadata:\n  name: "+name+"\nspec:\n  generate:\n    command: [cat]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// root is a short directory: unix socket paths are limited to 108 bytes.
func root(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "pub")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

func TestPublishesEachPluginsOwnSocketUnderItsName(t *testing.T) {
	r := root(t)
	p := &Publisher{Root: r, Routes: []Route{{Plugin: "a", Config: config(t, r, "vault-a")}, {Plugin: "b"}}}
	if missing := p.Tick(); len(missing) != 2 {
		t.Fatalf("before any server listens: missing %v, want both", missing)
	}
	if got := p.Check(); len(got) != 2 {
		t.Errorf("Check before: %v", got)
	}
	listen(t, filepath.Join(r, keys.PrivateSocketSubPath("a"), "vault-a.sock"), "server a")
	listen(t, filepath.Join(r, keys.PrivateSocketSubPath("b"), "team-b.sock"), "server b")
	if missing := p.Tick(); len(missing) != 0 {
		t.Fatalf("missing %v", missing)
	}
	if got := p.Check(); len(got) != 0 {
		t.Errorf("Check after: %v", got)
	}
	// What Argo CD's discovery does: list the root, keep sockets, dial.
	entries, err := os.ReadDir(r)
	if err != nil {
		t.Fatal(err)
	}
	var socks []string
	for _, e := range entries {
		if e.Type() == os.ModeSocket {
			socks = append(socks, e.Name())
		}
	}
	if strings.Join(socks, ",") != "team-b.sock,vault-a.sock" {
		t.Errorf("sockets Argo CD lists: %v", socks)
	}
	if got := who(t, filepath.Join(r, "vault-a.sock")); got != "server a" {
		t.Errorf("vault-a.sock answered %q", got)
	}
	if got := who(t, filepath.Join(r, "team-b.sock")); got != "server b" {
		t.Errorf("team-b.sock answered %q", got)
	}
}

// Plugin b's commands write only b's directory: whatever they put there, a's
// name stays a's. b is image-configured, the case where its directory names
// its socket.
func TestAPluginsDirectoryCannotTakeAnothersName(t *testing.T) {
	r := root(t)
	p := &Publisher{Root: r, Routes: []Route{{Plugin: "a", Config: config(t, r, "vault-a")}, {Plugin: "b"}}}
	aSock := filepath.Join(r, keys.PrivateSocketSubPath("a"), "vault-a.sock")
	listen(t, aSock, "server a")
	// A link to a's socket is not a socket of b's: nothing is claimed or
	// published from it.
	link := filepath.Join(r, keys.PrivateSocketSubPath("b"), "zz.sock")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(aSock, link); err != nil {
		t.Fatal(err)
	}
	if missing := p.Tick(); !strings.Contains(missing["b"], "no socket yet") {
		t.Errorf("b with only a link: missing = %v", missing)
	}
	if _, err := os.Lstat(filepath.Join(r, "zz.sock")); !os.IsNotExist(err) {
		t.Errorf("zz.sock was published: %v", err)
	}
	_ = os.Remove(link)
	// b's directory names a's socket: a keeps it.
	listen(t, filepath.Join(r, keys.PrivateSocketSubPath("b"), "vault-a.sock"), "impostor")
	if missing := p.Tick(); !strings.Contains(missing["b"], "plugin a's") {
		t.Errorf("b naming a's socket: missing = %v", missing)
	}
	if got := who(t, filepath.Join(r, "vault-a.sock")); got != "server a" {
		t.Errorf("vault-a.sock answered %q, want a's server", got)
	}
	// a's server restarts (a new inode): the publisher relinks a's own.
	if err := os.Remove(aSock); err != nil {
		t.Fatal(err)
	}
	listen(t, aSock, "server a again")
	p.Tick()
	if got := who(t, filepath.Join(r, "vault-a.sock")); got != "server a again" {
		t.Errorf("vault-a.sock answered %q, want a's restarted server", got)
	}
}

// An image-configured plugin's name is the first socket its server made,
// kept for the pod's life, also by a publisher that restarts.
func TestAnImageConfiguredPluginKeepsItsFirstSocketName(t *testing.T) {
	r := root(t)
	routes := []Route{{Plugin: "b"}}
	listen(t, filepath.Join(r, keys.PrivateSocketSubPath("b"), "team-b.sock"), "server b")
	if missing := (&Publisher{Root: r, Routes: routes}).Tick(); len(missing) != 0 {
		t.Fatal(missing)
	}
	listen(t, filepath.Join(r, keys.PrivateSocketSubPath("b"), "aaa.sock"), "impostor")
	_ = os.Remove(filepath.Join(r, keys.PrivateSocketSubPath("b"), "team-b.sock"))
	restarted := &Publisher{Root: r, Routes: routes}
	missing := restarted.Tick()
	if _, err := os.Lstat(filepath.Join(r, "aaa.sock")); !os.IsNotExist(err) {
		t.Errorf("a later socket of b's dir was published: %v", err)
	}
	if !strings.Contains(missing["b"], "team-b.sock") {
		t.Errorf("missing = %v, want b's claimed team-b.sock named", missing)
	}
}

// Two sockets before any claim: nothing is guessed.
func TestNoClaimFromTwoSockets(t *testing.T) {
	r := root(t)
	listen(t, filepath.Join(r, keys.PrivateSocketSubPath("b"), "one.sock"), "1")
	listen(t, filepath.Join(r, keys.PrivateSocketSubPath("b"), "two.sock"), "2")
	missing := (&Publisher{Root: r, Routes: []Route{{Plugin: "b"}}}).Tick()
	if !strings.Contains(missing["b"], "one.sock, two.sock") {
		t.Errorf("missing = %v", missing)
	}
}

// A live socket in the root that the publisher did not make (a hand-written
// sidecar's) is never replaced; a dead one is.
func TestAForeignLiveSocketIsLeftAlone(t *testing.T) {
	r := root(t)
	listen(t, filepath.Join(r, "vault-a.sock"), "hand-written")
	listen(t, filepath.Join(r, keys.PrivateSocketSubPath("a"), "vault-a.sock"), "server a")
	p := &Publisher{Root: r, Routes: []Route{{Plugin: "a", Config: config(t, r, "vault-a")}}}
	if missing := p.Tick(); !strings.Contains(missing["a"], "another server listens") {
		t.Errorf("missing = %v", missing)
	}
	if got := who(t, filepath.Join(r, "vault-a.sock")); got != "hand-written" {
		t.Errorf("answered %q", got)
	}

	r2 := root(t)
	l := listen(t, filepath.Join(r2, "vault-a.sock"), "dead")
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	_ = l.Close()
	listen(t, filepath.Join(r2, keys.PrivateSocketSubPath("a"), "vault-a.sock"), "server a")
	p2 := &Publisher{Root: r2, Routes: []Route{{Plugin: "a", Config: config(t, r2, "vault-a")}}}
	if missing := p2.Tick(); len(missing) != 0 {
		t.Fatalf("a stale socket was not replaced: %v", missing)
	}
	if got := who(t, filepath.Join(r2, "vault-a.sock")); got != "server a" {
		t.Errorf("answered %q", got)
	}
}

// A reload that renames the plugin moves the published name; one whose
// plugin.yaml no longer decodes keeps the previous name, as the server does.
func TestRenameFollowsThePluginYAML(t *testing.T) {
	r := root(t)
	cfg := config(t, r, "old")
	p := &Publisher{Root: r, Routes: []Route{{Plugin: "a", Config: cfg}}}
	listen(t, filepath.Join(r, keys.PrivateSocketSubPath("a"), "old.sock"), "old")
	p.Tick()
	if err := os.Rename(config(t, r, "new"), cfg); err != nil {
		t.Fatal(err)
	}
	listen(t, filepath.Join(r, keys.PrivateSocketSubPath("a"), "new.sock"), "new")
	if missing := p.Tick(); len(missing) != 0 {
		t.Fatal(missing)
	}
	if got := who(t, filepath.Join(r, "new.sock")); got != "new" {
		t.Errorf("new.sock answered %q", got)
	}
	if _, err := os.Lstat(filepath.Join(r, "old.sock")); !os.IsNotExist(err) {
		t.Errorf("old.sock stays: %v", err)
	}
	if err := os.WriteFile(cfg, []byte("spec: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if missing := p.Tick(); len(missing) != 0 {
		t.Errorf("a broken plugin.yaml unpublished the plugin: %v", missing)
	}
}

func TestTwoPluginsOfOneName(t *testing.T) {
	r := root(t)
	cfg := config(t, r, "same")
	listen(t, filepath.Join(r, keys.PrivateSocketSubPath("a"), "same.sock"), "a")
	listen(t, filepath.Join(r, keys.PrivateSocketSubPath("b"), "same.sock"), "b")
	missing := (&Publisher{Root: r, Routes: []Route{{Plugin: "a", Config: cfg}, {Plugin: "b", Config: cfg}}}).Tick()
	if len(missing) != 1 || !strings.Contains(missing["b"], "plugin a's") {
		t.Errorf("missing = %v", missing)
	}
	if got := who(t, filepath.Join(r, "same.sock")); got != "a" {
		t.Errorf("answered %q", got)
	}
}

func TestCheckPluginName(t *testing.T) {
	if err := CheckPluginName("helm"); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"", "../a", "a/b", "..", "."} {
		if CheckPluginName(bad) == nil {
			t.Errorf("CheckPluginName(%q) took it", bad)
		}
	}
}
