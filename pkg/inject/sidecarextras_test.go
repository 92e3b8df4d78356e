package inject

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

const sidecarFieldsCatalog = `
apiVersion: cmp-injector.io/v1alpha1
kind: PluginCatalog
revision: r1
defaults: {copyImage: cmp-server:1}
plugins:
  s:
    image: s:1
    config: {fromImage: true}
    envFrom: [{secretRef: {name: avp}}]
    env: [{name: X, value: $(HOME)/x}]
    home: {sizeLimit: 1Gi}
    volumes:
      - {name: age, mountPath: /keys, readOnly: false, secret: {secretName: sops-age}}
      - {name: ro, mountPath: /ro, readOnly: true, emptyDir: {sizeLimit: 1Mi}}
      - {name: rw, mountPath: /rw, emptyDir: {sizeLimit: 1Mi}}
      - {name: vault, mountPath: /vault, projected: {sources: [{serviceAccountToken: {audience: vault, path: token}}]}}
  t:
    image: t:1
    config: {fromImage: true}
    volumes:
      - {name: token, mountPath: /var/run/secrets/kubernetes.io/serviceaccount, projected: {sources: [{serviceAccountToken: {audience: vault, path: token}}]}}
namespaces:
  argocd: [s, t]
`

func sidecarFieldsCat(t *testing.T, replacements ...string) *catalog.Catalog {
	t.Helper()
	c, err := catalog.Parse([]byte(replaced(t, sidecarFieldsCatalog, replacements...)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mountAt(c *corev1.Container, path string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == path {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

// Inputs are read-only whatever the catalog says, an emptyDir follows it; the
// home's variables come first; every added container but one with its own
// token there shadows the default token directory.
func TestSidecarFieldsBuild(t *testing.T) {
	in := pod(map[string]string{keys.PluginsAnnotation: "s, t"}, nil)
	r := Inject(in, "argocd", sidecarFieldsCat(t))
	if r.Decision != Injected {
		t.Fatalf("not injected: %s", r.Message())
	}
	s, _ := findContainer(r.Pod, keys.SidecarName("s"))
	for path, ro := range map[string]bool{"/keys": true, "/ro": true, "/rw": false, "/vault": true, keys.PluginHomeDir: false} {
		if m := mountAt(s, path); m == nil || m.ReadOnly != ro {
			t.Errorf("mount at %s: %+v, want readOnly %v", path, m, ro)
		}
	}
	if len(s.Env) != 6 || s.Env[0].Name != keys.EnvHome || s.Env[4].Name != "X" || s.Env[5].Name != keys.EnvSecretEnv {
		t.Errorf("env %v: the home's variables must come before the catalog's, the secret rule last", envNames(s.Env))
	}
	if len(s.EnvFrom) != 1 || s.EnvFrom[0].SecretRef.Name != "avp" {
		t.Errorf("envFrom %+v", s.EnvFrom)
	}
	tc, _ := findContainer(r.Pod, keys.SidecarName("t"))
	cp, _ := findContainer(r.Pod, keys.CopyInitContainer)
	for c, want := range map[*corev1.Container]string{s: keys.NoTokenVolume, cp: keys.NoTokenVolume, tc: keys.PluginVolumeName("t", "token")} {
		if m := mountAt(c, keys.ServiceAccountTokenDir); m == nil || m.Name != want || !m.ReadOnly {
			t.Errorf("%s: token directory mount %+v, want %s read-only", c.Name, m, want)
		}
	}
}

// A stored pod (with the apiserver's defaults) is current with its catalog;
// a changed Secret name, audience, size limit or envFrom makes it stale.
func TestDriftSidecarFields(t *testing.T) {
	in := pod(map[string]string{keys.PluginsAnnotation: "s"}, nil)
	in.Namespace = "argocd"
	r := Inject(in, "argocd", sidecarFieldsCat(t))
	if r.Decision != Injected {
		t.Fatalf("not injected: %s", r.Message())
	}
	stored := r.Pod
	// What kube-apiserver stores: default modes, a token's default lifetime.
	mode, expiry := int32(420), int64(3600)
	for i := range stored.Spec.Volumes {
		v := &stored.Spec.Volumes[i].VolumeSource
		switch {
		case v.Secret != nil:
			v.Secret.DefaultMode = &mode
		case v.Projected != nil:
			v.Projected.DefaultMode = &mode
			v.Projected.Sources[0].ServiceAccountToken.ExpirationSeconds = &expiry
		}
	}
	for _, tc := range []struct {
		name  string
		repl  []string
		stale string
	}{
		{"unchanged", nil, ""},
		{"secret renamed", []string{"secretName: sops-age", "secretName: sops-age-2"}, "volume cmp-s-v-age's source differs"},
		{"audience", []string{"audience: vault, path: token}}]}}\n  t:", "audience: vault2, path: token}}]}}\n  t:"}, "volume cmp-s-v-vault's source differs"},
		{"home limit", []string{"home: {sizeLimit: 1Gi}", "home: {sizeLimit: 2Gi}"}, "volume cmp-s-home's source differs"},
		{"envFrom", []string{"secretRef: {name: avp}", "secretRef: {name: avp2}"}, "envFrom differs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := CheckDrift(stored, sidecarFieldsCat(t, tc.repl...))
			if err != nil {
				t.Fatal(err)
			}
			msg := d.StaleMessage()
			if (tc.stale == "") != (len(d.Stale) == 0) || !strings.Contains(msg, tc.stale) {
				t.Errorf("stale %q, want %q", msg, tc.stale)
			}
		})
	}
}
