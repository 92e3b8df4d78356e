package inject

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// argo-helm's own CMP example: a hand-written sidecar whose plugin.yaml is the
// key helm.yaml of argocd-cmp-cm, next to the catalog's helm plugin. Both
// create helm.sock; the pod is admitted with a warning naming both.
func TestSocketClashWarnings(t *testing.T) {
	handWritten := func(mount corev1.VolumeMount, items ...corev1.KeyToPath) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "my-helm", Image: "alpine/helm:3",
				Command:      []string{"/var/run/argocd/argocd-cmp-server"},
				VolumeMounts: []corev1.VolumeMount{{Name: keys.PluginsVolume, MountPath: keys.PluginSocketDir}, mount}})
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "cmp-plugin", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "argocd-cmp-cm"}, Items: items}}})
		}
	}
	subPath := corev1.VolumeMount{Name: "cmp-plugin", MountPath: "/home/argocd/cmp-server/config/plugin.yaml", SubPath: "helm.yaml"}
	for _, tc := range []struct {
		name string
		edit func(*corev1.Pod)
		want string
	}{
		{"subPath", handWritten(subPath),
			`container "my-helm" reads plugin.yaml from ConfigMap "argocd-cmp-cm" key "helm.yaml": if that plugin is named "helm", it creates the socket helm.sock that the injected sidecar "cmp-helm" of plugin "helm" creates too`},
		{"subPath through items", handWritten(corev1.VolumeMount{Name: "cmp-plugin", MountPath: "/home/argocd/cmp-server/config/plugin.yaml", SubPath: "p.yaml"},
			corev1.KeyToPath{Key: "helm.yaml", Path: "p.yaml"}), `key "helm.yaml"`},
		{"directory with items", handWritten(corev1.VolumeMount{Name: "cmp-plugin", MountPath: "/home/argocd/cmp-server/config"},
			corev1.KeyToPath{Key: "helm.yaml", Path: "plugin.yaml"}), `key "helm.yaml"`},
		{"another plugin", handWritten(corev1.VolumeMount{Name: "cmp-plugin", MountPath: "/home/argocd/cmp-server/config/plugin.yaml", SubPath: "sops.yaml"}), ""},
		{"no hand-written sidecar", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pod(map[string]string{keys.PluginsAnnotation: "helm"}, tc.edit)
			r := Inject(p, "argocd", testCat(t))
			if r.Decision != Injected {
				t.Fatal(r.Decision, r.Problems)
			}
			if tc.want == "" {
				if len(r.Warnings) > 0 {
					t.Fatalf("warnings %q", r.Warnings)
				}
				return
			}
			if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], tc.want) {
				t.Fatalf("warnings %q, want one containing %q", r.Warnings, tc.want)
			}
		})
	}
}
