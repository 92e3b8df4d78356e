package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// The pods `make bench-node` compares: Argo CD's repo-server pod (the chain's
// Deployment template after the README's patch) with 0, 1 or 4 plugins, either
// injected by the webhook or as Argo CD documents hand-written plugin
// sidecars.

// benchPlugins are the four plugins of the bench, the chain's catalog (helm
// and kustomize of the example catalog, the params and broken test plugins);
// one plugin is the first.
var benchPlugins = []string{"params", "helm", "kustomize", "broken"}

// benchLibraryPlugins are four plugins of the example catalog whose images carry
// cmp-server (serverPath): a pod of only these gets no copy init container,
// which is what issue 40's pod-start goal (4 library plugins, at most 4.0 s
// more than none) is about. benchValues enables them in the chain's namespace.
var benchLibraryPlugins = []string{"helm", "kustomize", "jsonnet", "ytt"}

// benchAppPath is where each plugin's Application lives in the bench
// repositories (testdata/repo, testdata/chain/repo and benchKustomize).
var benchAppPath = map[string]string{"params": "apps/params", memoryPlugin: "apps/params", "helm": "apps/guestbook", "kustomize": "apps/kustomize", "broken": "apps/params"}

// repoServerTemplate is the chain's argocd-repo-server Deployment's pod
// template with the README's merge patch applied, running image, placed on
// the node (no scheduler runs), with gitDir mounted read-only at its own path
// (the repositories' file:// URLs). The grace is short because Argo CD's
// argocd-cmp-server ignores SIGTERM and every hand-written pod would wait its
// grace out on deletion.
func repoServerTemplate(t *testing.T, readmePatch []byte, rel harness.ArgoRelease, gitDir string) *corev1.Pod {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "chain", "argocd-repo-server.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for from, to := range rel.RepoServerSubst() {
		b = bytes.ReplaceAll(b, []byte(from), []byte(to))
	}
	js, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	if js, err = jsonpatch.MergePatch(js, readmePatch); err != nil {
		t.Fatal(err)
	}
	var dep appsv1.Deployment
	if err := yaml.Unmarshal(js, &dep); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: dep.Spec.Template.ObjectMeta, Spec: dep.Spec.Template.Spec}
	pod.Spec.NodeName = harness.NodeName
	grace := int64(2)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	rs := &pod.Spec.Containers[0]
	rs.VolumeMounts = append(rs.VolumeMounts, corev1.VolumeMount{Name: "e2e-git", MountPath: gitDir, ReadOnly: true})
	dir := corev1.HostPathDirectory
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "e2e-git",
		VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: gitDir, Type: &dir}}})
	return pod
}

// benchPod is a fresh copy of tmpl named name: injected with plugins when
// inject is set (the README's opt-in label stays, the plugins annotation is
// set), otherwise without the opt-in label, so the webhook never sees it.
func benchPod(tmpl *corev1.Pod, name string, inject bool, plugins []string) *corev1.Pod {
	pod := tmpl.DeepCopy()
	pod.Name = name
	pod.Labels = mapsClone(pod.Labels)
	pod.Annotations = mapsClone(pod.Annotations)
	delete(pod.Annotations, keys.PluginsAnnotation)
	if inject {
		pod.Labels[keys.InjectLabel] = keys.EnabledValue
		pod.Annotations[keys.PluginsAnnotation] = strings.Join(plugins, ", ")
	} else {
		delete(pod.Labels, keys.InjectLabel)
	}
	return pod
}

func mapsClone(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// argoSidecars is the pod with a plugin sidecar for each of plugins written
// the way Argo CD's documentation on config management plugins describes
// one: a regular container (no startupProbe, no ordering), Argo CD's own
// argocd-cmp-server from the var-files volume copyutil fills, running as
// 999, the plugin's plugin.yaml from a ConfigMap (argoPluginConfigMap) mounted
// with subPath at /home/argocd/cmp-server/config/plugin.yaml, the shared
// plugins volume for the socket and an emptyDir of its own at /tmp. Each
// sidecar runs the image and the HELM_* environment our injected sidecar of
// the same plugin runs (injected).
func argoSidecars(pod, injected *corev1.Pod, plugins []string) *corev1.Pod {
	nonRoot, uid := true, int64(999)
	for _, p := range plugins {
		ours := findContainer(injected, keys.SidecarName(p))
		var env []corev1.EnvVar
		for _, e := range ours.Env {
			if strings.HasPrefix(e.Name, "HELM_") {
				env = append(env, e)
			}
		}
		cfg, tmp := argoPluginConfigMap(p), p+"-tmp"
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
			Name: p, Image: ours.Image, Command: []string{"/var/run/argocd/argocd-cmp-server"}, Env: env,
			ImagePullPolicy: corev1.PullIfNotPresent,
			SecurityContext: &corev1.SecurityContext{RunAsNonRoot: &nonRoot, RunAsUser: &uid},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "var-files", MountPath: "/var/run/argocd"},
				{Name: keys.PluginsVolume, MountPath: "/home/argocd/cmp-server/plugins"},
				{Name: cfg, MountPath: "/home/argocd/cmp-server/config/plugin.yaml", SubPath: "plugin.yaml"},
				{Name: tmp, MountPath: "/tmp"},
			},
		})
		pod.Spec.Volumes = append(pod.Spec.Volumes,
			corev1.Volume{Name: cfg, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: cfg}}}},
			corev1.Volume{Name: tmp, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	return pod
}

// argoPluginConfigMap names the ConfigMap of a hand-written sidecar's plugin.
func argoPluginConfigMap(plugin string) string { return "bench-argo-" + plugin }

// argoToolPlugins are plugin.yamls as users write them for Argo CD's
// sidecars, for the catalog plugins whose commands are our cmp-server's own
// subcommands (helm, kustomize), which Argo CD's sidecar does not have: each
// runs the tool itself. The plugin images have no shell (the plugin
// library's images are built here without one), so the arguments are
// literal: the bench's Application is "bench" in namespace "demo".
var argoToolPlugins = map[string]string{
	"helm": `apiVersion: argoproj.io/v1alpha1
kind: ConfigManagementPlugin
metadata:
  name: helm
spec:
  discover:
    fileName: Chart.yaml
  generate:
    command: [helm, template, bench, ., --namespace, demo]
`,
	"kustomize": `apiVersion: argoproj.io/v1alpha1
kind: ConfigManagementPlugin
metadata:
  name: kustomize
spec:
  discover:
    fileName: kustomization.yaml
  generate:
    command: [kustomize, build, .]
`,
}

// applyArgoPluginConfigs stores each plugin's plugin.yaml for the hand-written
// sidecars: what the injector rendered into the injected pod's config
// annotation (so both run the same commands), helm's and kustomize's from
// argoToolPlugins.
func applyArgoPluginConfigs(t *testing.T, injected *corev1.Pod, plugins []string) {
	t.Helper()
	for _, p := range plugins {
		cfg := injected.Annotations[keys.ConfigAnnotationPrefix+p]
		if own, ok := argoToolPlugins[p]; ok {
			cfg = own
		}
		if cfg == "" {
			t.Fatalf("the injected pod has no %s%s annotation", keys.ConfigAnnotationPrefix, p)
		}
		cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": argoPluginConfigMap(p)}, "data": map[string]string{"plugin.yaml": cfg}}
		if err := env.cp.Client().Apply("/api/v1/namespaces/"+chainNS+"/configmaps", argoPluginConfigMap(p), cm); err != nil {
			t.Fatal(err)
		}
	}
}

func findContainer(pod *corev1.Pod, name string) *corev1.Container {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return &corev1.Container{}
}

// memoryPlugin is the params plugin again under another name, with its /tmp
// in memory by the catalog's setting, so that one catalog injects both media.
const memoryPlugin = "params-memory"

// memoryTmpSizeLimit is memoryPlugin's tmpSizeLimit, which the catalog
// requires with medium Memory, below the chart's sidecar memory limit (512Mi):
// room for the 5,000-file tree (50 MB) and its tarball several times.
const memoryTmpSizeLimit = "256Mi"

// benchValues writes the chart values the bench adds to the chain's: the
// params plugin copied as memoryPlugin with tmpMedium Memory, enabled in
// Argo CD's namespace.
func benchValues(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "chain", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Catalog struct {
			Plugins    map[string]map[string]any `json:"plugins"`
			Namespaces map[string][]string       `json:"namespaces"`
		} `json:"catalog"`
	}
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	p := values.Catalog.Plugins[benchPlugins[0]]
	inline, _ := p["config"].(map[string]any)["inline"].(map[string]any)
	if inline == nil {
		t.Fatalf("the chain's %s plugin has no inline config", benchPlugins[0])
	}
	inline["metadata"] = map[string]any{"name": memoryPlugin}
	p["tmpMedium"], p["tmpSizeLimit"] = catalog.TmpMediumMemory, memoryTmpSizeLimit
	out, err := yaml.Marshal(map[string]any{"catalog": map[string]any{
		"plugins":    map[string]any{memoryPlugin: p},
		"namespaces": map[string]any{chainNS: addMissing(values.Catalog.Namespaces[chainNS], append([]string{memoryPlugin}, benchLibraryPlugins...))},
	}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "bench-values.yaml")
	if err := os.WriteFile(file, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// addMissing is list with each of more it lacks appended, in order.
func addMissing(list, more []string) []string {
	out := slices.Clone(list)
	for _, m := range more {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// tmpMedium says what plugin's /tmp is in pod: "disk" or the medium, with
// the size limit.
func tmpMedium(pod *corev1.Pod, plugin string) string {
	for _, v := range pod.Spec.Volumes {
		if v.Name != keys.TmpVolumeName(plugin) || v.EmptyDir == nil {
			continue
		}
		m := "disk"
		if v.EmptyDir.Medium != corev1.StorageMediumDefault {
			m = string(v.EmptyDir.Medium)
		}
		if v.EmptyDir.SizeLimit != nil {
			m += ", sizeLimit " + v.EmptyDir.SizeLimit.String()
		}
		return m
	}
	return "no " + keys.TmpVolumeName(plugin) + " volume"
}

// benchRepo writes files generated files of 10 kB (YAML-looking text, as
// make bench-e2e's repositories) under dir/files, a kustomize Application at
// apps/kustomize, and commits them with the suite's test repositories.
func benchRepo(t *testing.T, dir string, files int) (url, commit string) {
	t.Helper()
	words := strings.Fields("apiVersion kind metadata name namespace spec replicas image tag values chart labels app selector template containers ports env")
	const size = 10_000
	var buf bytes.Buffer
	x := uint64(files)*2654435761 + 1
	for i := 0; i < files; i++ {
		d := filepath.Join(dir, "files", "d"+strconv.Itoa(i%50))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		buf.Reset()
		for buf.Len() < size {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			fmt.Fprintf(&buf, "%s: %s\n", words[x%uint64(len(words))], strconv.FormatUint(x, 36))
		}
		if err := os.WriteFile(filepath.Join(d, "f"+strconv.Itoa(i)+".yaml"), buf.Bytes()[:size], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	k := filepath.Join(dir, "apps", "kustomize")
	if err := os.MkdirAll(k, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"kustomization.yaml": "resources: [config.yaml]\ncommonLabels: {app: bench}\n",
		"config.yaml":        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bench}\ndata: {key: value}\n",
	} {
		if err := os.WriteFile(filepath.Join(k, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	url, commit, err := harness.GitRepo(dir, filepath.Join("testdata", "repo"), filepath.Join("testdata", "chain", "repo"))
	if err != nil {
		t.Fatal(err)
	}
	return url, commit
}

// mib is bytes in MiB.
func mib(b int64) float64 { return float64(b) / (1 << 20) }
