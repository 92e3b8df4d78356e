package inject

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// injectedPod is a repo-server pod in namespace argocd asking for plugins,
// injected with the test catalog, with the defaults the apiserver adds to a
// stored pod applied, since the reconciler only ever sees stored pods.
func injectedPod(t *testing.T, plugins string, extra map[string]string) *corev1.Pod {
	t.Helper()
	return injectedPodWith(t, testCat(t), plugins, extra)
}

// injectedPodWith is injectedPod injected with cat.
func injectedPodWith(t *testing.T, cat *catalog.Catalog, plugins string, extra map[string]string) *corev1.Pod {
	t.Helper()
	ann := map[string]string{keys.PluginsAnnotation: plugins}
	for k, v := range extra {
		ann[k] = v
	}
	in := pod(ann, nil)
	in.Namespace = "argocd"
	r := Inject(in, "argocd", cat)
	if r.Decision != Injected {
		t.Fatalf("not injected: %s", r.Message())
	}
	out := r.Pod
	for _, list := range [][]corev1.Container{out.Spec.InitContainers, out.Spec.Containers} {
		for i := range list {
			c := &list[i]
			if c.ImagePullPolicy == "" {
				c.ImagePullPolicy = corev1.PullIfNotPresent
			}
			c.TerminationMessagePath = "/dev/termination-log"
			if c.TerminationMessagePolicy == "" {
				c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
			}
			if c.StartupProbe != nil {
				c.StartupProbe.SuccessThreshold = 1
			}
		}
	}
	mode := int32(0o644)
	for i := range out.Spec.Volumes {
		v := &out.Spec.Volumes[i]
		if v.DownwardAPI != nil {
			v.DownwardAPI.DefaultMode = &mode
			for j := range v.DownwardAPI.Items {
				v.DownwardAPI.Items[j].FieldRef.APIVersion = "v1"
			}
		}
		if v.ConfigMap != nil {
			v.ConfigMap.DefaultMode = &mode
		}
	}
	return out
}

// catalogWith is the test catalog with each old string replaced by new.
func catalogWith(t *testing.T, replacements ...string) *catalog.Catalog {
	t.Helper()
	c, err := catalog.Parse([]byte(catalogYAML(t, replacements...)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// catalogYAML is the test catalog's text with each old string replaced by
// new, for catalogs that must fail to load.
func catalogYAML(t *testing.T, replacements ...string) string {
	t.Helper()
	return replaced(t, testCatalog, replacements...)
}

// replaced is y with each old string replaced by new, once; each must be there.
func replaced(t *testing.T, y string, replacements ...string) string {
	t.Helper()
	for i := 0; i < len(replacements); i += 2 {
		if !strings.Contains(y, replacements[i]) {
			t.Fatalf("test catalog has no %q", replacements[i])
		}
		y = strings.Replace(y, replacements[i], replacements[i+1], 1)
	}
	return y
}

func TestDriftLiveVersusStale(t *testing.T) {
	const helmConfig = "{kind: ConfigManagementPlugin, metadata: {name: helm}, spec: {generate: {command: [helm, template, .]}}}"
	const newConfig = "{kind: ConfigManagementPlugin, metadata: {name: helm}, spec: {generate: {command: [helm, template, --include-crds, .]}}}"
	for _, tc := range []struct {
		name    string
		plugins string
		podAnn  map[string]string
		edit    func(*corev1.Pod)
		cat     *catalog.Catalog
		live    []string // config annotations set live
		stale   []string // plugin/reason
		rev     string   // status revision wanted
	}{
		{name: "unchanged", plugins: "helm, kustomize", cat: testCat(t), rev: "r1"},
		{name: "revision only", plugins: "helm", cat: catalogWith(t, "revision: r1", "revision: r2"), rev: "r2"},
		{name: "inline config", plugins: "helm, kustomize", cat: catalogWith(t, "revision: r1", "revision: r2", helmConfig, newConfig),
			live: []string{"helm"}, rev: "r2"},
		{name: "image and config: stale, config held back", plugins: "helm", rev: "r1",
			cat:   catalogWith(t, "revision: r1", "revision: r2", helmConfig, newConfig, "image: alpine/helm:3.16.2", "image: alpine/helm:3.17.0"),
			stale: []string{"helm/image"}},
		{name: "one plugin stale, the other live", plugins: "helm, kustomize", rev: "r1",
			cat:   catalogWith(t, "revision: r1", "revision: r2", helmConfig, newConfig, "image: kustomize:5", "image: kustomize:6"),
			live:  []string{"helm"},
			stale: []string{"kustomize/image"}},
		{name: "pull policy", plugins: "helm", cat: catalogWith(t, "image: alpine/helm:3.16.2", "image: alpine/helm:3.16.2\n    imagePullPolicy: Always"),
			stale: []string{"helm/image"}, rev: "r1"},
		{name: "default resources", plugins: "helm, kustomize", rev: "r1",
			cat:   catalogWith(t, "defaults: {copyImage: cmp-server:1}", "defaults: {copyImage: cmp-server:1, resources: {limits: {memory: 1Gi}}}"),
			stale: []string{"helm/resources", "kustomize/resources"}},
		{name: "env", plugins: "helm", rev: "r1", cat: catalogWith(t, "allowedImages:", "env: [{name: HELM_CACHE_HOME, value: /tmp}]\n    allowedImages:"),
			stale: []string{"helm/env"}},
		{name: "run as user", plugins: "helm", rev: "r1", cat: catalogWith(t, "defaults: {copyImage: cmp-server:1}", "defaults: {copyImage: cmp-server:1, runAsUser: 1000}"),
			stale: []string{"helm/security_context"}},
		{name: "sidecar mode", plugins: "helm", rev: "r1", cat: catalogWith(t, "defaults: {copyImage: cmp-server:1}", "defaults: {copyImage: cmp-server:1, nativeSidecars: false}"),
			stale: []string{"helm/sidecar_mode"}},
		{name: "config source", plugins: "helm", rev: "r1", cat: catalogWith(t, "inline: "+helmConfig, "configMap: {name: h}"),
			stale: []string{"helm/config_source", "helm/container_spec"}},
		{name: "configMap renamed", plugins: "kustomize", rev: "r1", cat: catalogWith(t, "configMap: {name: k, key: cfg.yaml}", "configMap: {name: k2, key: cfg.yaml}"),
			stale: []string{"kustomize/config_source"}},
		{name: "plugin gone from the catalog", plugins: "helm, kustomize", rev: "r1",
			cat:   catalogWith(t, "  kustomize:\n    image: kustomize:5\n    config: {configMap: {name: k, key: cfg.yaml}}\n", "", "[helm, kustomize]", "[helm]"),
			stale: []string{"kustomize/plugin_removed"}},
		{name: "plugin disabled in the namespace", plugins: "helm, kustomize", rev: "r1", cat: catalogWith(t, "[helm, kustomize]", "[helm]"),
			stale: []string{"kustomize/plugin_removed"}},
		{name: "plugin added to the pod", plugins: "helm", rev: "r1", cat: testCat(t),
			edit:  func(p *corev1.Pod) { p.Annotations[keys.PluginsAnnotation] = "helm, kustomize" },
			stale: []string{"kustomize/plugin_added"}},
		{name: "copy image", plugins: "helm", rev: "r1", cat: catalogWith(t, "copyImage: cmp-server:1", "copyImage: cmp-server:2"),
			stale: []string{"/copy_image", "/copy_image"}},
		// Pods of an injector before private socket dirs: every plugin could
		// reach every socket, so each is rolled.
		{name: "no sockets container", plugins: "helm", rev: "r1", cat: testCat(t),
			edit: func(p *corev1.Pod) {
				p.Spec.InitContainers = slices.DeleteFunc(p.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == keys.SocketsContainer })
			},
			stale: []string{"/container_spec"}},
		{name: "sidecar mounting the whole socket dir", plugins: "helm", rev: "r1", cat: testCat(t),
			edit: func(p *corev1.Pod) {
				c := &p.Spec.InitContainers[1]
				c.VolumeMounts = slices.Clone(c.VolumeMounts)
				for i := range c.VolumeMounts {
					c.VolumeMounts[i].SubPath = strings.Replace(c.VolumeMounts[i].SubPath, keys.PrivateSocketSubPath("helm"), "", 1)
				}
			},
			stale: []string{"helm/container_spec"}},
		{name: "repo-server setting", plugins: "helm", rev: "r1",
			cat:   catalogWith(t, "defaults: {copyImage: cmp-server:1}", "defaults: {copyImage: cmp-server:1, repoServer: {cmpChunkSize: 65536}}"),
			stale: []string{"/repo_server_env"}},
		{name: "repo-server settings dropped", plugins: "helm", rev: "r1",
			cat:   catalogWith(t, "defaults: {copyImage: cmp-server:1}", "defaults: {copyImage: cmp-server:1, repoServer: {cmpChunkSize: 0, pluginTarExclusions: []}}"),
			stale: []string{"/repo_server_env", "/repo_server_env"}},
		// A pod injected before the postStart gate: the startupProbe it
		// still has delays every start, so only a new pod is current.
		{name: "start gate of an older injector", plugins: "helm", rev: "r1", cat: testCat(t),
			edit: func(p *corev1.Pod) {
				c := &p.Spec.InitContainers[1]
				c.Lifecycle = nil
				c.StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{keys.PluginServerPath, "probe"}}},
					PeriodSeconds: 1, FailureThreshold: 60, TimeoutSeconds: 3, SuccessThreshold: 1}
			},
			stale: []string{"helm/container_spec"}},
		{name: "start gate with another timeout", plugins: "helm", rev: "r1", cat: testCat(t),
			edit: func(p *corev1.Pod) {
				h := p.Spec.InitContainers[1].Lifecycle.PostStart.Exec
				h.Command = slices.Clone(h.Command)
				h.Command[slices.Index(h.Command, "--timeout")+1] = "30s"
			},
			stale: []string{"helm/container_spec"}},
		{name: "tmp medium", plugins: "helm, kustomize", rev: "r1",
			cat:   catalogWith(t, "    image: kustomize:5\n", "    image: kustomize:5\n    tmpMedium: Memory\n    tmpSizeLimit: 256Mi\n"),
			stale: []string{"kustomize/container_spec"}},
		{name: "tmp size limit", plugins: "helm", rev: "r1",
			cat:   catalogWith(t, "defaults: {copyImage: cmp-server:1}", "defaults: {copyImage: cmp-server:1, tmpSizeLimit: 1Gi}"),
			stale: []string{"helm/container_spec"}},
		{name: "allowed override stays current", plugins: "helm", rev: "r1", cat: testCat(t),
			podAnn: map[string]string{keys.ImageAnnotationPrefix + "helm": "alpine/helm:3.15.0"}},
		{name: "override no longer allowed", plugins: "helm", rev: "r1", cat: catalogWith(t, `["alpine/helm:*"]`, `["alpine/helm:3.16.*"]`),
			podAnn: map[string]string{keys.ImageAnnotationPrefix + "helm": "alpine/helm:3.15.0"},
			stale:  []string{"helm/image"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := injectedPod(t, tc.plugins, tc.podAnn)
			if tc.edit != nil {
				tc.edit(p)
			}
			d, err := CheckDrift(p, tc.cat)
			if err != nil {
				t.Fatal(err)
			}
			var live []string
			for k, v := range d.Live {
				name := strings.TrimPrefix(k, keys.ConfigAnnotationPrefix)
				live = append(live, name)
				if v != tc.cat.Plugins[name].InlineYAML {
					t.Errorf("live %s = %q", k, v)
				}
			}
			var stale []string
			for _, s := range d.Stale {
				stale = append(stale, s.Plugin+"/"+string(s.Reason))
				if s.Message == "" {
					t.Errorf("%s has no message", s.Reason)
				}
			}
			if strings.Join(live, ",") != strings.Join(tc.live, ",") || strings.Join(stale, ",") != strings.Join(tc.stale, ",") {
				t.Errorf("live %v stale %v, want live %v stale %v\n%s", live, stale, tc.live, tc.stale, d.StaleMessage())
			}
			if d.Status.Revision != tc.rev {
				t.Errorf("status revision %s, want %s", d.Status.Revision, tc.rev)
			}
			if d.Current() != (len(tc.live) == 0 && len(tc.stale) == 0) {
				t.Errorf("Current() = %v", d.Current())
			}
			if len(d.Status.Stale) != len(d.Stale) {
				t.Errorf("status lists %d stale differences, drift %d", len(d.Status.Stale), len(d.Stale))
			}
			// Applying the patch makes the pod carry the new status; a
			// second check then wants nothing more.
			patch := d.Patch(p)
			if tc.name == "unchanged" && patch != nil {
				t.Errorf("an unchanged pod is patched: %v", patch)
			}
			for k, v := range patch {
				p.Annotations[k] = v
			}
			again, err := CheckDrift(p, tc.cat)
			if err != nil {
				t.Fatal(err)
			}
			if again.Patch(p) != nil || len(again.Live) != 0 {
				t.Errorf("after the patch, still %v", again.Patch(p))
			}
			var st Status
			if err := json.Unmarshal([]byte(p.Annotations[keys.StatusAnnotation]), &st); err != nil || st.Revision != tc.rev {
				t.Errorf("status annotation %s: %v", p.Annotations[keys.StatusAnnotation], err)
			}
		})
	}
}

func TestDriftRefusesPodsItDidNotInject(t *testing.T) {
	for _, ann := range []map[string]string{{}, {keys.StatusAnnotation: "injected"}} {
		p := pod(ann, nil)
		if _, err := CheckDrift(p, testCat(t)); err == nil {
			t.Errorf("annotations %v: no error", ann)
		}
	}
}
