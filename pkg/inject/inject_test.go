package inject

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

const testCatalog = `
apiVersion: cmp-injector.io/v1alpha1
kind: PluginCatalog
revision: r1
defaults: {copyImage: cmp-server:1}
plugins:
  helm:
    image: alpine/helm:3.16.2
    allowedImages: ["alpine/helm:*"]
    config:
      inline: {kind: ConfigManagementPlugin, metadata: {name: helm}, spec: {generate: {command: [helm, template, .]}}}
  kustomize:
    image: kustomize:5
    config: {configMap: {name: k, key: cfg.yaml}}
namespaces:
  argocd: [helm, kustomize]
`

func testCat(t testing.TB) *catalog.Catalog {
	t.Helper()
	c, err := catalog.Parse([]byte(testCatalog))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEscapePointer(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                    "plain",
		"cmp-injector.io/status":   "cmp-injector.io~1status",
		"a~b/c":                    "a~0b~1c",
		"~1":                       "~01",
		"config.cmp-injector.io/x": "config.cmp-injector.io~1x",
	} {
		if got := escapePointer(in); got != want {
			t.Errorf("escapePointer(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParsePlugins(t *testing.T) {
	for _, tc := range []struct {
		in       string
		names    []string
		problems int
	}{
		{"helm", []string{"helm"}, 0},
		{" helm ,kustomize ", []string{"helm", "kustomize"}, 0},
		{"", nil, 1},
		{"helm,", []string{"helm"}, 1},
		{"helm,,kustomize", []string{"helm", "kustomize"}, 1},
		{"helm kustomize", []string{}, 1},
		{"helm;kustomize", []string{}, 1},
		{"helm,helm", []string{"helm"}, 1},
		{"Helm,-x,a_b", []string{}, 3},
	} {
		names, problems := parsePlugins(tc.in)
		if len(problems) != tc.problems || (tc.names != nil && !reflect.DeepEqual(names, tc.names)) {
			t.Errorf("parsePlugins(%q) = %v, %v", tc.in, names, problems)
		}
		for _, p := range problems {
			if p.Reason != ReasonMalformedAnnotation || !strings.Contains(p.Message, keys.PluginsAnnotation) {
				t.Errorf("problem %+v", p)
			}
		}
	}
}

func pod(annotations map[string]string, mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{}
	p.Labels = map[string]string{keys.InjectLabel: "true"}
	p.Annotations = annotations
	p.Spec.Containers = []corev1.Container{{Name: "argocd-repo-server", Image: "argocd"}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

// The patch, applied to the pod as JSON, must give exactly Report.Pod, whether
// the lists and maps it extends are absent, empty or populated.
func TestPatchMatchesMutatedPod(t *testing.T) {
	cat := testCat(t)
	for name, p := range map[string]*corev1.Pod{
		"minimal": pod(map[string]string{keys.PluginsAnnotation: "helm,kustomize"}, nil),
		"empty lists": pod(map[string]string{keys.PluginsAnnotation: "kustomize"}, func(p *corev1.Pod) {
			p.Spec.Volumes, p.Spec.InitContainers = []corev1.Volume{}, []corev1.Container{}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{}
		}),
		"populated": pod(map[string]string{keys.PluginsAnnotation: "helm", "a/b~c": "x"}, func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "var-files"}, {Name: "other"}}
			p.Spec.InitContainers = []corev1.Container{{Name: "copyutil"}}
			p.Spec.Containers = append([]corev1.Container{{Name: "first"}}, p.Spec.Containers...)
			p.Spec.Containers[1].VolumeMounts = []corev1.VolumeMount{{Name: "x", MountPath: "/x"}}
		}),
	} {
		t.Run(name, func(t *testing.T) {
			before := p.DeepCopy()
			r := Inject(p, "argocd", cat)
			if r.Decision != Injected {
				t.Fatalf("%s: %s", r.Decision, r.Message())
			}
			if !equality.Semantic.DeepEqual(p, before) {
				t.Error("Inject modified its input")
			}
			checkPatch(t, p, r)
		})
	}
}

func checkPatch(t testing.TB, in *corev1.Pod, r *Report) {
	t.Helper()
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := jsonpatch.DecodePatch(r.Patch)
	if err != nil {
		t.Fatalf("decode patch: %v", err)
	}
	out, err := patch.Apply(raw)
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, r.Patch)
	}
	var got corev1.Pod
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(&got, r.Pod) {
		t.Errorf("patched pod differs from Report.Pod\npatch: %s", r.Patch)
	}
}

func TestRepoServerPlacementAndUID(t *testing.T) {
	cat := testCat(t)
	uid := int64(1234)
	p := pod(map[string]string{keys.PluginsAnnotation: "helm"}, func(p *corev1.Pod) {
		p.Spec.Containers = append([]corev1.Container{{Name: "istio-proxy"}}, p.Spec.Containers...)
		p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: &uid}
	})
	r := Inject(p, "argocd", cat)
	if n := len(r.Pod.Spec.Containers[0].VolumeMounts); n != 0 {
		t.Errorf("mount added to the first container instead of argocd-repo-server")
	}
	if m := r.Pod.Spec.Containers[1].VolumeMounts; len(m) != 1 || m[0].MountPath != keys.PluginSocketDir {
		t.Errorf("repo-server mounts %v", m)
	}
	sc := r.Pod.Spec.InitContainers[1].SecurityContext
	if *sc.RunAsUser != 1234 || !*sc.RunAsNonRoot || *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("sidecar security context %+v", sc)
	}
}

func TestConfigMapMountUsesKeyAsSubPath(t *testing.T) {
	r := Inject(pod(map[string]string{keys.PluginsAnnotation: "kustomize"}, nil), "argocd", testCat(t))
	m := r.Pod.Spec.InitContainers[1].VolumeMounts[4]
	if m.SubPath != "cfg.yaml" || m.MountPath != keys.PluginConfigDir+"/plugin.yaml" || !m.ReadOnly {
		t.Errorf("config mount %+v", m)
	}
}

// Every name the injector adds for a plugin is a valid DNS-1123 label for the
// longest plugin name the catalog accepts, and the catalog accepts no name
// one character longer unless one of those names would break: the limit is
// asked of catalog.Parse, not computed again here.
func TestDerivedNamesAreValid(t *testing.T) {
	withPlugin := func(name string) (*catalog.Catalog, error) {
		return catalog.Parse([]byte(catalogYAML(t,
			"plugins:\n", "plugins:\n  "+name+":\n    image: x:1\n    config: {configMap: {name: c, key: k}}\n",
			"argocd: [helm, kustomize]", "argocd: [helm, kustomize, "+name+"]")))
	}
	longest := 0
	for n := 1; n <= 2*63; n++ {
		if _, err := withPlugin(strings.Repeat("a", n)); err == nil {
			longest = n
		}
	}
	if longest == 0 {
		t.Fatal("the catalog accepts no plugin name at all")
	}
	name := strings.Repeat("a", longest)
	cat, _ := withPlugin(name)
	p := pod(map[string]string{keys.PluginsAnnotation: name}, nil)
	r := Inject(p, "argocd", cat)
	if r.Decision != Injected {
		t.Fatalf("a %d-character plugin name: %s %v", longest, r.Decision, r.Problems)
	}
	added := slices.Concat(r.Status.Containers, r.Status.InitContainers, r.Status.Volumes)
	if !slices.Contains(added, keys.ConfigVolumeName(name)) || !slices.Contains(added, keys.TmpVolumeName(name)) {
		t.Fatalf("the injected pod lacks the plugin's volumes: %v", added)
	}
	for _, n := range added {
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			t.Errorf("a %d-character plugin name gives %s: %v", longest, n, errs)
		}
	}
	// The limit is no tighter than the names need.
	tight := false
	for _, n := range keys.DerivedNames(name + "a") {
		tight = tight || len(validation.IsDNS1123Label(n)) > 0
	}
	if !tight {
		t.Errorf("the catalog refuses %d-character plugin names, whose derived names %v are all valid", longest+1, keys.DerivedNames(name+"a"))
	}
}

// Native sidecars are gated by a postStart hook that runs the copied server
// binary until the plugin answers, so the repo-server starts after every plugin
// answers and no later; nothing of the former startupProbe remains (it would
// hold each start for a probe period). Classic sidecars, which come after the
// repo-server and so gate nothing, get neither. Every sidecar reports its log
// tail when it exits without a termination message.
func TestStartGateOnlyOnNativeSidecars(t *testing.T) {
	cat := testCat(t)
	r := Inject(pod(map[string]string{keys.PluginsAnnotation: "helm,kustomize"}, nil), "argocd", cat)
	want := []string{keys.PluginServerPath, "probe", "--wait", "--timeout", "60s", "--termination-log", "/dev/termination-log"}
	for _, c := range r.Pod.Spec.InitContainers {
		if c.StartupProbe != nil {
			t.Errorf("%s has a startupProbe: %+v", c.Name, c.StartupProbe)
		}
		if c.Name == keys.CopyInitContainer {
			if c.Lifecycle != nil {
				t.Errorf("the copy init container has a lifecycle: %+v", c.Lifecycle)
			}
			continue
		}
		want := want
		if c.Name == keys.SocketsContainer {
			want = []string{keys.CopyServerBinary, "publish", "--wait", "--timeout", "60s", "--termination-log", "/dev/termination-log",
				"--config-dir", keys.SocketsConfigDir, "--plugin", "helm", "--plugin", "kustomize"}
		}
		if c.Lifecycle == nil || c.Lifecycle.PostStart == nil || c.Lifecycle.PostStart.Exec == nil ||
			!reflect.DeepEqual(c.Lifecycle.PostStart.Exec.Command, want) || c.Lifecycle.PreStop != nil {
			t.Errorf("%s lifecycle %+v, want postStart exec %q", c.Name, c.Lifecycle, want)
		}
		if c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
			t.Errorf("%s terminationMessagePolicy %q", c.Name, c.TerminationMessagePolicy)
		}
	}
	cat.Defaults.NativeSidecars = false
	r = Inject(pod(map[string]string{keys.PluginsAnnotation: "helm,kustomize"}, nil), "argocd", cat)
	for _, c := range append(r.Pod.Spec.InitContainers, r.Pod.Spec.Containers...) {
		if c.StartupProbe != nil || c.Lifecycle != nil {
			t.Errorf("classic mode: %s has a startupProbe or lifecycle: %+v %+v", c.Name, c.StartupProbe, c.Lifecycle)
		}
		sidecar := c.Name == keys.SidecarName("helm") || c.Name == keys.SidecarName("kustomize")
		if sidecar && c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
			t.Errorf("classic mode: %s terminationMessagePolicy %q", c.Name, c.TerminationMessagePolicy)
		}
	}
}

// A plugin's /tmp goes to memory when the catalog says so, the plugin's
// setting over the default's, with its size limit; the drift check names the
// old and new /tmp.
func TestTmpMedium(t *testing.T) {
	cat := catalogWith(t, "defaults: {copyImage: cmp-server:1}", "defaults: {copyImage: cmp-server:1, tmpMedium: Memory, tmpSizeLimit: 512Mi}",
		"    image: kustomize:5\n", "    image: kustomize:5\n    tmpMedium: Disk\n")
	in := pod(map[string]string{keys.PluginsAnnotation: "helm, kustomize"}, nil)
	r := Inject(in, "argocd", cat)
	if r.Decision != Injected {
		t.Fatal(r.Decision, r.Problems)
	}
	want := map[string]corev1.StorageMedium{"cmp-helm-tmp": corev1.StorageMediumMemory, "cmp-kustomize-tmp": ""}
	for _, v := range r.Pod.Spec.Volumes {
		if w, ok := want[v.Name]; ok {
			if v.EmptyDir == nil || v.EmptyDir.Medium != w || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.String() != "512Mi" {
				t.Errorf("volume %s: %+v, want medium %q, sizeLimit 512Mi", v.Name, v.EmptyDir, w)
			}
			delete(want, v.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("missing volumes %v", want)
	}
	checkPatch(t, pod(map[string]string{keys.PluginsAnnotation: "helm, kustomize"}, nil), r)

	stored := injectedPod(t, "helm", nil)
	d, err := CheckDrift(stored, cat)
	if err != nil {
		t.Fatal(err)
	}
	if msg := d.StaleMessage(); !strings.Contains(msg, "plugin helm: /tmp is on the node's disk, unbounded, the catalog says in memory, sizeLimit 512Mi") {
		t.Errorf("drift: %s", msg)
	}
}

// Every repo-server volume can be bounded (argo-helm's
// repoServer.emptyDir.sizeLimit): the sidecars' private /tmp too, by the
// catalog's default or the plugin's own limit.
func TestTmpSizeLimit(t *testing.T) {
	limits := []string{"defaults: {copyImage: cmp-server:1}", "defaults: {copyImage: cmp-server:1, tmpSizeLimit: 1Gi}",
		"    image: kustomize:5\n", "    image: kustomize:5\n    tmpSizeLimit: 256Mi\n"}
	cat := catalogWith(t, limits...)
	r := Inject(pod(map[string]string{keys.PluginsAnnotation: "helm, kustomize"}, nil), "argocd", cat)
	if r.Decision != Injected {
		t.Fatal(r.Decision, r.Problems)
	}
	want := map[string]string{"cmp-helm-tmp": "1Gi", "cmp-kustomize-tmp": "256Mi"}
	for _, v := range r.Pod.Spec.Volumes {
		if w, ok := want[v.Name]; ok {
			if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.String() != w {
				t.Errorf("volume %s: %+v, want sizeLimit %s", v.Name, v.EmptyDir, w)
			}
			delete(want, v.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("missing volumes %v", want)
	}
	checkPatch(t, pod(map[string]string{keys.PluginsAnnotation: "helm, kustomize"}, nil), r)
	// Unset: unbounded, as before.
	r = Inject(pod(map[string]string{keys.PluginsAnnotation: "helm"}, nil), "argocd", testCat(t))
	for _, v := range r.Pod.Spec.Volumes {
		if v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil && v.Name != keys.ShmVolumeName("helm") {
			t.Errorf("volume %s bounded without a setting", v.Name)
		}
	}
	_, err := catalog.Parse([]byte(catalogYAML(t, append(limits, "tmpSizeLimit: 256Mi", "tmpSizeLimit: \"0\"")...)))
	if err == nil || !strings.Contains(err.Error(), "plugins.kustomize.tmpSizeLimit: must be a positive size") {
		t.Errorf("a zero limit: %v", err)
	}
}

// OpenShift's restricted-v2 SCC: with runAsUserPolicy Assigned no fixed UID is
// ever written; the sidecars take the repo-server's (the SCC's preassigned
// one) when it has one, and none when nothing in the pod sets one.
func TestRunAsUserAssigned(t *testing.T) {
	cat := catalogWith(t, "defaults: {copyImage: cmp-server:1}", "defaults: {copyImage: cmp-server:1, runAsUserPolicy: Assigned}")
	uidOf := func(c corev1.Container) string { return uidText(c.SecurityContext) }
	r := Inject(pod(map[string]string{keys.PluginsAnnotation: "helm"}, nil), "argocd", cat)
	for _, c := range r.Pod.Spec.InitContainers {
		if c.SecurityContext.RunAsUser != nil || !*c.SecurityContext.RunAsNonRoot {
			t.Errorf("%s: runAsUser %s, runAsNonRoot %v: want none and true", c.Name, uidOf(c), *c.SecurityContext.RunAsNonRoot)
		}
	}
	preassigned := int64(1000680000)
	r = Inject(pod(map[string]string{keys.PluginsAnnotation: "helm"}, func(p *corev1.Pod) {
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: &preassigned}
	}), "argocd", cat)
	for _, c := range r.Pod.Spec.InitContainers {
		if uidOf(c) != "1000680000" {
			t.Errorf("%s: runAsUser %s, want the repo-server's 1000680000", c.Name, uidOf(c))
		}
	}
	for bad, want := range map[string]string{
		"runAsUserPolicy: Assigned, runAsUser: 999": "defaults.runAsUser: must not be set with runAsUserPolicy Assigned",
		"runAsUserPolicy: assigned":                 `defaults.runAsUserPolicy: must be Fixed or Assigned (got "assigned")`,
	} {
		_, err := catalog.Parse([]byte(catalogYAML(t, "defaults: {copyImage: cmp-server:1}", "defaults: {copyImage: cmp-server:1, "+bad+"}")))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", bad, err, want)
		}
	}
}

// No plugin's sidecar mounts the socket directory whole: each binds in its
// own part of the volume, which only the repo-server and the sockets
// container see whole, and each has a /dev/shm of its own (the repo-server
// keeps SSH keys in the pod's). The sockets container reads each plugin's
// name from the plugin's config volume, read-only.
func TestEachSidecarSeesOnlyItsOwnSocketDir(t *testing.T) {
	for _, native := range []bool{true, false} {
		cat := testCat(t)
		cat.Defaults.NativeSidecars = native
		r := Inject(pod(map[string]string{keys.PluginsAnnotation: "helm, kustomize"}, nil), "argocd", cat)
		if r.Decision != Injected {
			t.Fatalf("%+v", r)
		}
		whole := map[string]bool{}
		var sockets *corev1.Container
		for _, list := range [][]corev1.Container{r.Pod.Spec.InitContainers, r.Pod.Spec.Containers} {
			for i := range list {
				c := &list[i]
				if c.Name == keys.SocketsContainer {
					sockets = c
				}
				plugin := strings.TrimPrefix(c.Name, keys.SidecarPrefix)
				for _, m := range c.VolumeMounts {
					switch {
					case m.Name == keys.PluginsVolume && m.SubPath == "":
						whole[c.Name] = true
					case m.Name == keys.PluginsVolume && m.SubPath != keys.PrivateSocketSubPath(plugin):
						t.Errorf("%s mounts the socket volume's %q", c.Name, m.SubPath)
					}
				}
				if _, ok := cat.Plugins[plugin]; ok && !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
					return m.Name == keys.ShmVolumeName(plugin) && m.MountPath == keys.ShmDir
				}) {
					t.Errorf("%s has no private %s: %+v", c.Name, keys.ShmDir, c.VolumeMounts)
				}
			}
		}
		if !whole["argocd-repo-server"] || !whole[keys.SocketsContainer] || len(whole) != 2 {
			t.Errorf("native %v: containers mounting the socket volume whole: %v, want the repo-server and %s", native, whole, keys.SocketsContainer)
		}
		if sockets == nil {
			t.Fatalf("native %v: no %s", native, keys.SocketsContainer)
		}
		if got := (sockets.RestartPolicy != nil) == native; !got {
			t.Errorf("native %v: sockets container restartPolicy %v", native, sockets.RestartPolicy)
		}
		wantCmd := []string{keys.CopyServerBinary, "publish", "--config-dir", keys.SocketsConfigDir, "--plugin", "helm", "--plugin", "kustomize"}
		if !reflect.DeepEqual(sockets.Command, wantCmd) || sockets.Image != cat.Defaults.CopyImage {
			t.Errorf("sockets container runs %s %q", sockets.Image, sockets.Command)
		}
		for _, m := range sockets.VolumeMounts {
			if m.Name != keys.PluginsVolume && !m.ReadOnly {
				t.Errorf("sockets container mounts %s writable", m.Name)
			}
		}
		checkPatch(t, pod(map[string]string{keys.PluginsAnnotation: "helm, kustomize"}, nil), r)
	}
}
