package catalog

import (
	"strings"
	"testing"
)

// sidecarCatalog is a valid catalog whose plugin "p" has the given fields
// (YAML indented for the plugin), plus plugins the name clashes need.
func sidecarCatalog(fields string, extraPlugins string) string {
	return "apiVersion: cmp-injector.io/v1alpha1\nkind: PluginCatalog\ndefaults: {copyImage: ghcr.io/x/cmp-server:1}\nplugins:\n" +
		"  p:\n    image: example.com/p:1\n    config: {fromImage: true}\n" + fields + extraPlugins
}

// Each bad sidecar field is refused with a message that names the plugin,
// the field and what is wrong.
func TestSidecarFieldProblems(t *testing.T) {
	for _, tc := range []struct {
		name, fields, extra string
		want                []string
	}{
		{"envFrom with both refs", "    envFrom: [{secretRef: {name: s}, configMapRef: {name: c}}]\n", "",
			[]string{"plugins.p.envFrom[0]: exactly one of secretRef, configMapRef must be set (2 set)"}},
		{"envFrom with none", "    envFrom: [{prefix: A_}]\n", "",
			[]string{"plugins.p.envFrom[0]: exactly one of secretRef, configMapRef must be set (0 set)"}},
		{"envFrom Secret without a name", "    envFrom: [{secretRef: {}}]\n", "",
			[]string{"plugins.p.envFrom[0].secretRef.name: required: the name of a Secret in the repo-server's namespace"}},
		{"envFrom bad ConfigMap name", "    envFrom: [{configMapRef: {name: Bad_Name}}]\n", "",
			[]string{`plugins.p.envFrom[0].configMapRef.name: invalid ConfigMap name "Bad_Name"`}},
		{"envFrom bad prefix", "    envFrom: [{secretRef: {name: s}, prefix: \"1-\"}]\n", "",
			[]string{`plugins.p.envFrom[0].prefix: invalid prefix "1-"`}},
		{"env value and valueFrom", "    env: [{name: A, value: x, valueFrom: {secretKeyRef: {name: s, key: k}}}]\n", "",
			[]string{"plugins.p.env[0]: value and valueFrom are both set; keep one"}},
		{"env valueFrom two sources", "    env: [{name: A, valueFrom: {secretKeyRef: {name: s, key: k}, configMapKeyRef: {name: c, key: k}}}]\n", "",
			[]string{"plugins.p.env[0].valueFrom: exactly one of fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef, fileKeyRef must be set (2 set)"}},
		{"env secretKeyRef without key", "    env: [{name: A, valueFrom: {secretKeyRef: {name: s}}}]\n", "",
			[]string{`plugins.p.env[0].valueFrom.secretKeyRef.key: invalid Secret key ""`}},
		{"env sets HOME with home", "    home: {sizeLimit: 1Gi}\n    env: [{name: XDG_CACHE_HOME, value: /x}]\n", "",
			[]string{"plugins.p.env[0].name: XDG_CACHE_HOME is set by home (to a directory under /home/cmp-plugin); remove one of them"}},
		{"home without a limit", "    home: {}\n", "",
			[]string{"plugins.p.home.sizeLimit: required: a writable HOME is bounded, e.g. 1Gi"}},
		{"home with a zero limit", "    home: {sizeLimit: \"0\"}\n", "",
			[]string{"plugins.p.home.sizeLimit: must be a positive size such as 1Gi (got 0)"}},
		{"volume without a source", "    volumes: [{name: a, mountPath: /a}]\n", "",
			[]string{"plugins.p.volumes[0]: exactly one of secret, configMap, projected, emptyDir must be set (0 set)"}},
		{"volume with two sources", "    volumes: [{name: a, mountPath: /a, secret: {secretName: s}, configMap: {name: c}}]\n", "",
			[]string{"plugins.p.volumes[0]: exactly one of secret, configMap, projected, emptyDir must be set (2 set)"}},
		{"volume bad name", "    volumes: [{name: Age, mountPath: /a, secret: {secretName: s}}]\n", "",
			[]string{`plugins.p.volumes[0].name: invalid volume name "Age"`}},
		{"volume pod name too long", "    volumes: [{name: " + strings.Repeat("a", 60) + ", mountPath: /a, secret: {secretName: s}}]\n", "",
			[]string{`plugins.p.volumes[0].name: the pod volume "cmp-p-v-` + strings.Repeat("a", 60) + `" is longer than 63 characters: shorten the plugin or volume name`}},
		{"duplicate volume names", "    volumes: [{name: a, mountPath: /a, secret: {secretName: s}}, {name: a, mountPath: /b, secret: {secretName: s}}]\n", "",
			[]string{`plugins.p.volumes[1].name: duplicate volume name "a" (also volumes[0])`}},
		{"relative mountPath", "    volumes: [{name: a, mountPath: keys, secret: {secretName: s}}]\n", "",
			[]string{`plugins.p.volumes[0].mountPath: "keys" must be an absolute, clean path other than / (no trailing /, no . or ..)`}},
		{"unclean mountPath", "    volumes: [{name: a, mountPath: /keys/../etc, secret: {secretName: s}}]\n", "",
			[]string{`plugins.p.volumes[0].mountPath: "/keys/../etc" must be an absolute, clean path`}},
		{"missing mountPath", "    volumes: [{name: a, secret: {secretName: s}}]\n", "",
			[]string{"plugins.p.volumes[0].mountPath: required"}},
		{"mountPath /tmp", "    volumes: [{name: a, mountPath: /tmp/x, emptyDir: {sizeLimit: 1Gi}}]\n", "",
			[]string{`plugins.p.volumes[0].mountPath: "/tmp/x" overlaps /tmp, which the injector mounts in every sidecar`}},
		{"mountPath above the socket directory", "    volumes: [{name: a, mountPath: /home/argocd, emptyDir: {sizeLimit: 1Gi}}]\n", "",
			[]string{`plugins.p.volumes[0].mountPath: "/home/argocd" overlaps /home/argocd/cmp-server/plugins`,
				`plugins.p.volumes[0].mountPath: "/home/argocd" overlaps /home/argocd/cmp-server/config`}},
		{"mountPath var-files", "    volumes: [{name: a, mountPath: /var/run/argocd, secret: {secretName: s}}]\n", "",
			[]string{`plugins.p.volumes[0].mountPath: "/var/run/argocd" overlaps /var/run/argocd,`}},
		{"mountPath above the token directory", "    volumes: [{name: a, mountPath: /var/run/secrets, secret: {secretName: s}}]\n", "",
			[]string{`plugins.p.volumes[0].mountPath: "/var/run/secrets" overlaps /var/run/secrets/kubernetes.io/serviceaccount: mount a token exactly there or elsewhere`}},
		{"mountPaths nested", "    volumes: [{name: a, mountPath: /keys, secret: {secretName: s}}, {name: b, mountPath: /keys/b, secret: {secretName: s}}]\n", "",
			[]string{`plugins.p.volumes[1].mountPath: "/keys/b" overlaps volumes[0]'s mountPath "/keys": one would hide the other`}},
		{"secret without a name", "    volumes: [{name: a, mountPath: /a, secret: {}}]\n", "",
			[]string{"plugins.p.volumes[0].secret.secretName: required: the name of a Secret in the repo-server's namespace"}},
		{"secret item escapes", "    volumes: [{name: a, mountPath: /a, secret: {secretName: s, items: [{key: k, path: ../k}]}}]\n", "",
			[]string{`plugins.p.volumes[0].secret.items[0].path: "../k" must be a relative path without '..'`}},
		{"configMap mode", "    volumes: [{name: a, mountPath: /a, configMap: {name: c, defaultMode: 4096}}]\n", "",
			[]string{"plugins.p.volumes[0].configMap.defaultMode: must be a file mode between 0 and 0777 (got 4096)"}},
		{"token without audience", "    volumes: [{name: a, mountPath: /a, projected: {sources: [{serviceAccountToken: {path: token}}]}}]\n", "",
			[]string{"plugins.p.volumes[0].projected.sources[0].serviceAccountToken.audience: required: name the service that will read the token"}},
		{"token lifetime too short", "    volumes: [{name: a, mountPath: /a, projected: {sources: [{serviceAccountToken: {audience: vault, expirationSeconds: 60, path: token}}]}}]\n", "",
			[]string{"plugins.p.volumes[0].projected.sources[0].serviceAccountToken.expirationSeconds: must be between 600 and 4294967296 (got 60)"}},
		{"token without path", "    volumes: [{name: a, mountPath: /a, projected: {sources: [{serviceAccountToken: {audience: vault}}]}}]\n", "",
			[]string{`plugins.p.volumes[0].projected.sources[0].serviceAccountToken.path: "" must be a relative path without '..'`}},
		{"projected downwardAPI", "    volumes: [{name: a, mountPath: /a, projected: {sources: [{downwardAPI: {items: [{path: name, fieldRef: {fieldPath: metadata.name}}]}}]}}]\n", "",
			[]string{"plugins.p.volumes[0].projected.sources[0]: only secret, configMap and serviceAccountToken sources are supported in the catalog"}},
		{"projected empty", "    volumes: [{name: a, mountPath: /a, projected: {}}]\n", "",
			[]string{"plugins.p.volumes[0].projected.sources: required: at least one of secret, configMap, serviceAccountToken"}},
		{"emptyDir without limit", "    volumes: [{name: a, mountPath: /a, emptyDir: {}}]\n", "",
			[]string{"plugins.p.volumes[0].emptyDir.sizeLimit: required: a writable volume is bounded, e.g. 1Gi"}},
		{"emptyDir hugepages", "    volumes: [{name: a, mountPath: /a, emptyDir: {medium: HugePages, sizeLimit: 1Gi}}]\n", "",
			[]string{`plugins.p.volumes[0].emptyDir.medium: must be empty (the node's disk) or Memory (got "HugePages")`}},
		{"unknown volume field", "    volumes: [{name: a, mountPath: /a, hostPath: {path: /}}]\n", "",
			[]string{`unknown field "plugins.p.volumes[0].hostPath"`}},
		// Plugin p's volume "v-x-tmp"... spells cmp-p-v-x-tmp, the /tmp of plugin p-v-x.
		{"pod volume name of another plugin", "    volumes: [{name: x-tmp, mountPath: /a, emptyDir: {sizeLimit: 1Gi}}]\n",
			"  p-v-x:\n    image: example.com/q:1\n    config: {fromImage: true}\n",
			[]string{`plugins.p-v-x: pod volume "cmp-p-v-x-tmp" is also a volume of plugin "p": rename one of them`}},
		{"pod volume name of the injector", "", "  injector-no:\n    image: example.com/q:1\n    config: {fromImage: true}\n",
			nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(sidecarCatalog(tc.fields, tc.extra)))
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted; want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message\n  %s\nlacks\n  %s", err, w)
				}
			}
		})
	}
}

// A catalog with every sidecar field is accepted and keeps them as written.
func TestSidecarFieldsAccepted(t *testing.T) {
	c, err := Parse([]byte(sidecarCatalog(`    envFrom: [{secretRef: {name: avp}, prefix: AVP_}]
    env: [{name: T, valueFrom: {secretKeyRef: {name: s, key: k}}}, {name: NS, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}]
    home: {sizeLimit: 1Gi}
    volumes:
      - {name: age, mountPath: /keys, secret: {secretName: sops-age}}
      - {name: ca, mountPath: /ca, configMap: {name: ca}}
      - {name: token, mountPath: /var/run/secrets/kubernetes.io/serviceaccount, projected: {sources: [{serviceAccountToken: {audience: vault, path: token}}]}}
      - {name: cache, mountPath: /cache, readOnly: false, emptyDir: {sizeLimit: 1Gi}}
`, "")))
	if err != nil {
		t.Fatal(err)
	}
	e := c.Plugins["p"]
	if len(e.EnvFrom) != 1 || len(e.Volumes) != 4 || e.Home == nil || e.Home.SizeLimit.String() != "1Gi" {
		t.Errorf("entry %+v", e.Plugin)
	}
	for i, want := range []bool{true, true, true, false} {
		if e.Volumes[i].IsInput() != want {
			t.Errorf("volumes[%d].IsInput() = %v", i, !want)
		}
	}
}
