package catalog

import (
	"strings"
	"testing"
)

// serverPath is kept as written when it names a file the sidecar can run, and
// refused with the field and the reason otherwise.
func TestServerPath(t *testing.T) {
	for _, tc := range []struct {
		name, fields string
		want         string // "" accepted
	}{
		{"library image", "    serverPath: /usr/local/bin/cmp-server\n", ""},
		{"elsewhere in the image", "    serverPath: /opt/cmp/bin/cmp-server\n", ""},
		{"beside a catalog volume", "    serverPath: /keys-bin/cmp-server\n    volumes: [{name: a, mountPath: /keys, secret: {secretName: s}}]\n", ""},
		{"relative", "    serverPath: usr/local/bin/cmp-server\n",
			`plugins.p.serverPath: "usr/local/bin/cmp-server" must be the absolute, clean path of cmp-server in the plugin's image, e.g. /usr/local/bin/cmp-server`},
		{"unclean", "    serverPath: /usr/local/bin/../bin/cmp-server\n",
			`plugins.p.serverPath: "/usr/local/bin/../bin/cmp-server" must be the absolute, clean path`},
		{"a directory", "    serverPath: /usr/local/bin/\n",
			`plugins.p.serverPath: "/usr/local/bin/" must be the absolute, clean path`},
		{"root", "    serverPath: /\n", `plugins.p.serverPath: "/" must be the absolute, clean path`},
		{"control character", "    serverPath: \"/usr/local/bin/cmp-server\\n\"\n", `must be the absolute, clean path`},
		{"the copy's place", "    serverPath: /var/run/argocd/cmp-server\n",
			`plugins.p.serverPath: "/var/run/argocd/cmp-server" is where the copy init container puts the server, not a path in the image: give where the image holds cmp-server, e.g. /usr/local/bin/cmp-server`},
		{"under /tmp", "    serverPath: /tmp/cmp-server\n",
			`plugins.p.serverPath: "/tmp/cmp-server" is under /tmp, which is mounted over in the sidecar: the image's file there is hidden`},
		{"under the config directory", "    serverPath: /home/argocd/cmp-server/config/cmp-server\n",
			`is under /home/argocd/cmp-server/config, which is mounted over`},
		{"under the token directory", "    serverPath: /var/run/secrets/kubernetes.io/serviceaccount/cmp-server\n",
			`is under /var/run/secrets/kubernetes.io/serviceaccount, which is mounted over`},
		{"under a catalog volume", "    serverPath: /keys/cmp-server\n    volumes: [{name: a, mountPath: /keys, secret: {secretName: s}}]\n",
			`plugins.p.serverPath: "/keys/cmp-server" is under /keys, which is mounted over`},
		{"under the askpass directory", "    serverPath: /home/argocd/cmp-server/askpass/cmp-server\n    gitCredentials: true\n",
			`is under /home/argocd/cmp-server/askpass, which is mounted over`},
		{"askpass directory without credentials", "    serverPath: /home/argocd/cmp-server/askpass/cmp-server\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(sidecarCatalog(tc.fields, "")))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if got, want := c.Plugins["p"].ServerPath, strings.TrimSpace(strings.SplitN(strings.TrimPrefix(tc.fields, "    serverPath: "), "\n", 2)[0]); got != want {
					t.Errorf("serverPath %q, want %q", got, want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v\nwant it to contain %s", err, tc.want)
			}
		})
	}
}

// Without serverPath an entry says nothing about its image: the server is
// copied, as before the field existed.
func TestServerPathUnsetByDefault(t *testing.T) {
	c, err := Parse([]byte(sidecarCatalog("", "")))
	if err != nil {
		t.Fatal(err)
	}
	if sp := c.Plugins["p"].ServerPath; sp != "" {
		t.Errorf("serverPath %q, want none", sp)
	}
}
