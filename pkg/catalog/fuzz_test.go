package catalog

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// FuzzParse: any input gives an error or a catalog whose pod volume names are
// DNS-1123 labels, distinct across plugins, and whose sidecar mount paths
// keep clear of what the injector mounts itself.
func FuzzParse(f *testing.F) {
	head := "apiVersion: cmp-injector.io/v1alpha1\nkind: PluginCatalog\ndefaults: {copyImage: a/b:1}\nplugins:\n"
	for _, seed := range []string{
		"  p: {image: a/p:1, config: {fromImage: true}}\n",
		"  p: {image: a/p:1, config: {fromImage: true}, envFrom: [{secretRef: {name: s}, prefix: A_}, {configMapRef: {name: c, optional: true}}]}\n",
		"  p: {image: a/p:1, config: {fromImage: true}, env: [{name: T, valueFrom: {secretKeyRef: {name: s, key: k}}}]}\n",
		"  p: {image: a/p:1, config: {fromImage: true}, home: {sizeLimit: 1Gi}}\n",
		"  p: {image: a/p:1, config: {fromImage: true}, volumes: [{name: age, mountPath: /keys, secret: {secretName: sops-age}}]}\n",
		"  p: {image: a/p:1, config: {fromImage: true}, volumes: [{name: ca, mountPath: /ca, configMap: {name: ca, items: [{key: a, path: b}]}}]}\n",
		"  p: {image: a/p:1, config: {fromImage: true}, volumes: [{name: t, mountPath: /t, projected: {sources: [{serviceAccountToken: {audience: vault, expirationSeconds: 600, path: token}}, {secret: {name: s}}]}}]}\n",
		"  p: {image: a/p:1, config: {fromImage: true}, volumes: [{name: c, mountPath: /c, emptyDir: {medium: Memory, sizeLimit: 1Mi}}]}\n",
		"  p: {image: a/p:1, config: {fromImage: true}, volumes: [{name: x-tmp, mountPath: /c, emptyDir: {sizeLimit: 1Mi}}]}\n  p-v-x: {image: a/p:1, config: {fromImage: true}}\n",
		"  p: {image: a/p:1, config: {fromImage: true}, volumes: [{name: a, mountPath: /tmp/a, emptyDir: {sizeLimit: 1Mi}}]}\n",
	} {
		f.Add([]byte(head + seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		seen := map[string]string{}
		for _, name := range c.Names {
			e := c.Plugins[name]
			podNames := []string{keys.TmpVolumeName(name), keys.ConfigVolumeName(name), keys.HomeVolumeName(name)}
			for _, v := range e.Volumes {
				podNames = append(podNames, keys.PluginVolumeName(name, v.Name))
				for _, r := range reservedMountPaths {
					if overlaps(v.MountPath, r) {
						t.Fatalf("plugin %s: volume %s at %q overlaps %s", name, v.Name, v.MountPath, r)
					}
				}
			}
			for _, n := range podNames {
				if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
					t.Fatalf("plugin %s: pod volume %q: %v", name, n, errs)
				}
				if other, dup := seen[n]; dup {
					t.Fatalf("pod volume %q of plugins %s and %s", n, other, name)
				}
				seen[n] = name
			}
		}
	})
}
