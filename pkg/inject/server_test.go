package inject

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// Paths the test catalog's images carry cmp-server at, when it says so.
const (
	helmServer      = "/usr/local/bin/cmp-server"
	kustomizeServer = "/opt/cmp/cmp-server"
)

// serverCatalog is the test catalog with serverPath on the plugins named
// (helm, kustomize), then each further old string replaced by new.
func serverCatalog(t *testing.T, plugins []string, replacements ...string) *catalog.Catalog {
	t.Helper()
	var r []string
	for _, p := range plugins {
		switch p {
		case "helm":
			r = append(r, "    image: alpine/helm:3.16.2\n", "    image: alpine/helm:3.16.2\n    serverPath: "+helmServer+"\n")
		case "kustomize":
			r = append(r, "    image: kustomize:5\n", "    image: kustomize:5\n    serverPath: "+kustomizeServer+"\n")
		default:
			t.Fatalf("no plugin %s in the test catalog", p)
		}
	}
	return catalogWith(t, append(r, replacements...)...)
}

func containerNamed(p *corev1.Pod, name string) *corev1.Container {
	c, _ := findContainer(p, name)
	return c
}

// When every plugin's image carries the server, the pod gets no copy init
// container and no var-files, and each sidecar runs and gates on its own
// image's server; the sockets container stays the copy image's.
func TestServerFromImages(t *testing.T) {
	for _, native := range []bool{true, false} {
		t.Run(sidecarMode(native), func(t *testing.T) {
			cat := serverCatalog(t, []string{"helm", "kustomize"})
			if !native {
				cat = serverCatalog(t, []string{"helm", "kustomize"}, "defaults: {copyImage: cmp-server:1}", "defaults: {copyImage: cmp-server:1, nativeSidecars: false}")
			}
			in := pod(map[string]string{keys.PluginsAnnotation: "helm, kustomize"}, nil)
			r := Inject(in, "argocd", cat)
			if r.Decision != Injected {
				t.Fatalf("%s: %s", r.Decision, r.Message())
			}
			if r.Server == nil || r.Server.Source != ServerFromImages || r.Server.WithoutServerPath != nil {
				t.Errorf("server %+v, want from images", r.Server)
			}
			if c := containerNamed(r.Pod, keys.CopyInitContainer); c != nil || slices.Contains(r.Status.InitContainers, keys.CopyInitContainer) {
				t.Errorf("copy init container added: %v", r.Status.InitContainers)
			}
			for _, v := range r.Pod.Spec.Volumes {
				if v.Name == keys.VarFilesVolume {
					t.Errorf("volume %s added, which nothing uses", v.Name)
				}
			}
			if slices.Contains(r.Status.Volumes, keys.VarFilesVolume) {
				t.Errorf("status volumes %v", r.Status.Volumes)
			}
			for plugin, server := range map[string]string{"helm": helmServer, "kustomize": kustomizeServer} {
				c := containerNamed(r.Pod, keys.SidecarName(plugin))
				if c == nil {
					t.Fatalf("no sidecar for %s", plugin)
				}
				if !slices.Equal(c.Command, []string{server}) || !slices.Equal(c.Args, []string{serveCommand}) {
					t.Errorf("%s runs %v %v, want %s serve", c.Name, c.Command, c.Args, server)
				}
				for _, m := range c.VolumeMounts {
					if m.Name == keys.VarFilesVolume || m.MountPath == keys.VarFilesMountPath {
						t.Errorf("%s mounts %s at %s", c.Name, m.Name, m.MountPath)
					}
				}
				if native {
					if gate := c.Lifecycle.PostStart.Exec.Command; gate[0] != server || gate[1] != probeCommand {
						t.Errorf("%s gates on %v, want its own server's probe", c.Name, gate)
					}
				} else if c.Lifecycle != nil {
					t.Errorf("classic %s has a hook", c.Name)
				}
			}
			if s := containerNamed(r.Pod, keys.SocketsContainer); s == nil || s.Image != cat.Defaults.CopyImage {
				t.Errorf("sockets container %v", s)
			}
			if !native && len(r.Pod.Spec.InitContainers) != 0 {
				t.Errorf("classic pod got init containers %v", r.Status.InitContainers)
			}
			checkPatch(t, in, r)
			// The pod as injected is the catalog's: a second pass leaves it.
			if again := Inject(r.Pod, "argocd", cat); again.Decision != Skipped || again.Reasons[0] != ReasonAlreadyInjected {
				t.Errorf("second pass %s: %s", again.Decision, again.Message())
			}
		})
	}
}

// One plugin without serverPath keeps the copy for every sidecar: the pod is
// exactly what a catalog without the field gives, patch included.
func TestServerCopiedUnlessEveryPlugin(t *testing.T) {
	mixed := serverCatalog(t, []string{"helm"})
	in := pod(map[string]string{keys.PluginsAnnotation: "helm, kustomize"}, nil)
	got, want := Inject(in, "argocd", mixed), Inject(in, "argocd", testCat(t))
	if got.Decision != Injected || want.Decision != Injected {
		t.Fatalf("%s / %s", got.Message(), want.Message())
	}
	if got.Server.Source != ServerCopied || !slices.Equal(got.Server.WithoutServerPath, []string{"kustomize"}) {
		t.Errorf("server %+v, want copied because of kustomize", got.Server)
	}
	if want.Server.Source != ServerCopied || !slices.Equal(want.Server.WithoutServerPath, []string{"helm", "kustomize"}) {
		t.Errorf("server without the field %+v", want.Server)
	}
	if !equality.Semantic.DeepEqual(got.Pod, want.Pod) || string(got.Patch) != string(want.Patch) {
		t.Errorf("a mixed pod differs from today's:\n%s\n%s", got.Patch, want.Patch)
	}
	if !strings.Contains(got.Server.Describe(), "no serverPath in the catalog for kustomize") {
		t.Errorf("describe %q", got.Server.Describe())
	}
	// The decision is per pod: helm alone runs from its image.
	if r := Inject(pod(map[string]string{keys.PluginsAnnotation: "helm"}, nil), "argocd", mixed); r.Server.Source != ServerFromImages {
		t.Errorf("helm alone: %+v", r.Server)
	}
}

// A pod with its own var-files (Argo CD's copyutil fills it) keeps it as it
// is: the sidecars do not mount it when they run their images' server.
func TestServerFromImagesLeavesThePodsVarFiles(t *testing.T) {
	in := pod(map[string]string{keys.PluginsAnnotation: "helm"}, func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{emptyDir(keys.VarFilesVolume)}
		p.Spec.InitContainers = []corev1.Container{{Name: "copyutil", Image: "argocd"}}
	})
	r := Inject(in, "argocd", serverCatalog(t, []string{"helm"}))
	if r.Decision != Injected {
		t.Fatal(r.Message())
	}
	var inits []string
	for _, c := range r.Pod.Spec.InitContainers {
		inits = append(inits, c.Name)
	}
	if want := []string{"copyutil", "cmp-helm", keys.SocketsContainer}; !slices.Equal(inits, want) {
		t.Errorf("init containers %v, want %v", inits, want)
	}
	if n := len(r.Pod.Spec.Volumes); r.Pod.Spec.Volumes[0].Name != keys.VarFilesVolume || slices.Contains(r.Status.Volumes, keys.VarFilesVolume) || n < 2 {
		t.Errorf("volumes %v, status %v", r.Pod.Spec.Volumes, r.Status.Volumes)
	}
	for _, m := range containerNamed(r.Pod, "cmp-helm").VolumeMounts {
		if m.Name == keys.VarFilesVolume {
			t.Errorf("the sidecar mounts the pod's var-files")
		}
	}
	checkPatch(t, in, r)
}

// A pre-rendered pod is held to the catalog's decision for its plugins, not
// to what it says of itself: without the copy where the catalog copies, it is
// refused; a copy container it carries anyway must run the copy image.
func TestPrerenderedServerSource(t *testing.T) {
	images := serverCatalog(t, []string{"helm", "kustomize"})
	ann := map[string]string{keys.PluginsAnnotation: "helm, kustomize"}
	noCopy := Inject(pod(ann, nil), "argocd", images).Pod
	withCopy := Inject(pod(ann, nil), "argocd", testCat(t)).Pod
	tampered := withCopy.DeepCopy()
	setImage(tampered, keys.CopyInitContainer, "evil/cp:1")
	for _, tc := range []struct {
		name   string
		pod    *corev1.Pod
		cat    *catalog.Catalog
		reason Reason
		msg    string
	}{
		{"rendered from images, the same catalog", noCopy, images, ReasonAlreadyInjected, ""},
		{"rendered from images, a catalog that copies", noCopy, testCat(t), ReasonNotCatalog,
			`the pod carries "cmp-injector.io/status" but not the container "cmp-injector-copy" that cmp-injector would have added`},
		{"rendered with the copy, a catalog of images", withCopy, images, ReasonAlreadyInjected, ""},
		{"a copy container with another image", tampered, images, ReasonImageNotAllowed, `container "cmp-injector-copy" must run the catalog's copy image`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Inject(tc.pod, "argocd", tc.cat)
			if !slices.Contains(r.Reasons, tc.reason) || !strings.Contains(r.Message(), tc.msg) {
				t.Errorf("%s %v: %s\nwant %s: %s", r.Decision, r.Reasons, r.Message(), tc.reason, tc.msg)
			}
		})
	}
}

// A catalog change that turns the server source of a running pod around is
// one difference of the pod (the copy init container comes or goes); a new
// path in a plugin's image is one of that plugin; the copy image is stale
// only where a copy runs.
func TestDriftServerSource(t *testing.T) {
	both := []string{"helm", "kustomize"}
	for _, tc := range []struct {
		name     string
		injectBy *catalog.Catalog
		plugins  string
		cat      *catalog.Catalog
		stale    []string // plugin/reason
		msg      string
	}{
		{name: "copied, still copied", injectBy: testCat(t), plugins: "helm, kustomize", cat: serverCatalog(t, []string{"helm"})},
		{name: "copied, now from images", injectBy: testCat(t), plugins: "helm, kustomize", cat: serverCatalog(t, both),
			stale: []string{"/server_source"}, msg: "a new pod runs each image's own and has no copy init container"},
		{name: "from images, unchanged", injectBy: serverCatalog(t, both), plugins: "helm, kustomize", cat: serverCatalog(t, both)},
		{name: "from images, now copied", injectBy: serverCatalog(t, both), plugins: "helm, kustomize", cat: serverCatalog(t, []string{"helm"}),
			stale: []string{"/server_source"}, msg: "the catalog has no serverPath for kustomize, so a new pod has it copied by the init container cmp-injector-copy"},
		{name: "from images, another path", injectBy: serverCatalog(t, both), plugins: "helm, kustomize",
			cat:   serverCatalog(t, both, "serverPath: "+helmServer, "serverPath: /bin/cmp-server"),
			stale: []string{"helm/server_source"}, msg: `plugin helm: runs cmp-server at "/usr/local/bin/cmp-server" in its image, the catalog's serverPath is /bin/cmp-server`},
		// Only the sockets container runs the copy image: one difference.
		{name: "from images, copy image", injectBy: serverCatalog(t, both), plugins: "helm",
			cat:   serverCatalog(t, both, "copyImage: cmp-server:1", "copyImage: cmp-server:2"),
			stale: []string{"/copy_image"}, msg: "container cmp-injector-sockets runs cmp-server:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := injectedPodWith(t, tc.injectBy, tc.plugins, nil)
			d, err := CheckDrift(p, tc.cat)
			if err != nil {
				t.Fatal(err)
			}
			var stale []string
			for _, s := range d.Stale {
				stale = append(stale, s.Plugin+"/"+string(s.Reason))
			}
			if !slices.Equal(stale, tc.stale) || !strings.Contains(d.StaleMessage(), tc.msg) {
				t.Errorf("stale %v: %s\nwant %v: %s", stale, d.StaleMessage(), tc.stale, tc.msg)
			}
			if d.Current() != (len(tc.stale) == 0) {
				t.Errorf("Current() = %v", d.Current())
			}
		})
	}
}
