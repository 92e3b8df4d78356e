package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
	"github.com/cmp-injector/cmp-injector/test/sopstest"
)

// The plugin library (deploy/plugins/<name>/) through Argo CD's own
// repo-server: the example catalog's entry injected into a repo-server pod
// shaped like Argo CD's, the pod booted with each pinned release, an
// Application of the library's test repository rendered by GenerateManifest.
// Each sidecar runs the cmp-server built for this run and the pinned tools of
// bin/, the binaries the plugin's image holds (hack/images checks that the
// image's tools are bin/'s, byte for byte). The sops sidecar reads its age key
// from the Secret volume of its catalog entry, as the kubelet projects it.

// libraryRepo is the test repository: the plugins' own test apps.
var libraryRepo = filepath.Join("..", "..", "deploy", "plugins", "testdata")

// libraryStack is what every library case shares: a namespace where the
// injector serves the example catalog, Argo CD's objects and Redis in it, and
// the test repository.
type libraryStack struct {
	ns, repoURL, commit string
	rels                []harness.ArgoRelease
}

// startLibrary starts the injector with the example catalog enabling plugins
// (and helm, which waitActive's probe pod asks for) and everything a
// repo-server needs in a fresh namespace; the test repository is the library's
// test apps plus the trees of extra.
func startLibrary(t *testing.T, plugins []string, extra ...string) *libraryStack {
	t.Helper()
	rels, err := harness.ArgoReleases()
	if err != nil {
		t.Fatal(err)
	}
	startInjector(t, catalogFor(t, true, map[string][]string{"*": append([]string{"helm"}, plugins...)}))
	ns := newNamespace(t, "library", enabledNS)
	waitActive(t, ns)
	argoConfig(t, ns, "library-redis")
	repoURL, commit, err := harness.GitRepo(filepath.Join(t.TempDir(), "git"), append([]string{libraryRepo}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	return &libraryStack{ns: ns, repoURL: repoURL, commit: commit, rels: rels}
}

// bootRepoServer creates a repo-server pod of release rel asking for plugins
// (the pod template of Argo CD's Deployment, testdata/chain), lets the
// webhook inject it, and boots what the apiserver stored.
func (s *libraryStack) bootRepoServer(t *testing.T, rel harness.ArgoRelease, plugins, dir string) (*harness.RepoServer, *corev1.Pod) {
	t.Helper()
	pod := repoServerPod(t, "repo-server-"+dir, rel.Image(), plugins)
	stored := createStored(t, s.ns, pod)
	t.Cleanup(func() { _ = env.cp.Client().Delete("/api/v1/namespaces/" + s.ns + "/pods/" + stored.Name) })
	start := time.Now()
	rs, err := harness.BootRepoServer(env.cp.Client(), stored, rel, env.bins["cmp-server"], filepath.Join(env.root, dir), env.logFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rs.Stop)
	t.Logf("Argo CD %s repo-server pod with %s booted in %s", rel.Version, plugins, time.Since(start).Round(time.Millisecond))
	return rs, stored
}

// generate asks the repo-server for an Application's manifests: the source
// at path of the test repository, through plugin.
func (s *libraryStack) generate(rs *harness.RepoServer, app, path string, plugin *argoPlugin) (manifestResponse, error) {
	return s.generateWith(rs, &argoRepo{Repo: s.repoURL}, app, path, plugin)
}

// generateWith is generate with the repository (and its credentials) given.
func (s *libraryStack) generateWith(rs *harness.RepoServer, repo *argoRepo, app, path string, plugin *argoPlugin) (manifestResponse, error) {
	req := manifestRequest{
		Repo: repo, Revision: "HEAD", NoCache: true,
		AppName: app, Namespace: "demo",
		ApplicationSource: &argoSource{RepoURL: s.repoURL, Path: path, TargetRevision: "HEAD", Plugin: plugin},
		KubeVersion:       kubeVersion(), APIVersions: []string{"v1", "apps/v1"},
		ProjectName: "default", ProjectSourceRepos: []string{"*"},
	}
	var resp manifestResponse
	err := rs.Call("generate", req, &resp)
	return resp, err
}

// objectsByName decodes Argo CD's manifests (JSON) by kind/name.
func objectsByName(t *testing.T, manifests []string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, m := range manifests {
		var obj map[string]any
		if err := json.Unmarshal([]byte(m), &obj); err != nil {
			t.Fatalf("manifest is not JSON: %v\n%s", err, m)
		}
		meta, _ := obj["metadata"].(map[string]any)
		out[fmt.Sprintf("%v/%v", obj["kind"], meta["name"])] = obj
	}
	return out
}

func TestPluginLibrary(t *testing.T) {
	// The sops app, encrypted at run time to a fresh age key with a random
	// planted value (test/sopstest): nothing secret is committed, and the
	// value found anywhere but in the rendered Secret is a leak.
	bin := filepath.Join(env.repo, "bin")
	key := sopstest.NewKey(t, bin)
	planted := sopstest.Planted(t)
	sopsTree := t.TempDir()
	if err := os.Mkdir(filepath.Join(sopsTree, "sops"), 0o755); err != nil {
		t.Fatal(err)
	}
	sopstest.WriteApp(t, bin, filepath.Join(sopsTree, "sops"), key.Recipient, planted)

	s := startLibrary(t, []string{"jsonnet", "sops", "kustomize", "kustomize-helm", "ytt", "tanka", "cdk8s"}, sopsTree)
	setAgeKey(t, s.ns, key)
	for i, rel := range s.rels {
		t.Run("Argo CD "+rel.Version, func(t *testing.T) {
			rs, stored := s.bootRepoServer(t, rel, strings.Join(libraryPlugins, ", "), "lib"+strconv.Itoa(i))
			if st := status(t, stored); !reflect.DeepEqual(st.Plugins, libraryPlugins) {
				t.Fatalf("pod injected with %v, want %v", st.Plugins, libraryPlugins)
			}
			spec, _ := json.Marshal(stored)
			sopstest.NotLeaked(t, "the stored pod (env, volumes)", string(spec), key, planted)
			t.Run("jsonnet with ext-vars, tlas, tla-code and libs", func(t *testing.T) {
				resp, err := s.generate(rs, "shop", "jsonnet", &argoPlugin{Name: "jsonnet", Parameters: []argoParam{
					{Name: "ext-vars", Map: map[string]string{"env": "prod", "greeting": "hello, world"}},
					{Name: "tlas", Map: map[string]string{"name": "shop"}},
					{Name: "tla-code", Map: map[string]string{"replicas": "1 + 2"}},
					{Name: "libs", Array: []string{"../jsonnet-vendor"}},
				}})
				if err != nil {
					t.Fatal(err)
				}
				if resp.SourceType != "Plugin" || resp.Revision != s.commit {
					t.Errorf("source type %q revision %q, want Plugin and %s", resp.SourceType, resp.Revision, s.commit)
				}
				objs := objectsByName(t, resp.Manifests)
				cm, ok := objs["ConfigMap/shop-prod"]
				if _, svc := objs["Service/shop"]; !ok || !svc || len(objs) != 2 {
					t.Fatalf("manifests %v, want ConfigMap/shop-prod and Service/shop", resp.Manifests)
				}
				want := map[string]any{"greeting": "hello, world", "replicas": "3", "replicas-type": "number"}
				if !reflect.DeepEqual(cm["data"], want) {
					t.Errorf("data %v, want %v", cm["data"], want)
				}
			})
			t.Run("jsonnet's error is what Argo CD reports", func(t *testing.T) {
				_, err := s.generate(rs, "shop", "jsonnet", &argoPlugin{Name: "jsonnet", Parameters: []argoParam{
					{Name: "libs", Array: []string{"../jsonnet-vendor"}},
				}})
				if err == nil || !strings.Contains(err.Error(), "Undefined external variable") {
					t.Errorf("err %v, want jsonnet's undefined external variable", err)
				}
			})
			t.Run("sops decrypts with the key of the Secret volume", func(t *testing.T) {
				for _, plugin := range []*argoPlugin{{Name: "sops"}, {}} {
					resp, err := s.generate(rs, "db", "sops", plugin)
					if err != nil {
						t.Fatal(err)
					}
					objs := objectsByName(t, resp.Manifests)
					sec, ok := objs["Secret/db"]
					if _, cm := objs["ConfigMap/settings"]; !ok || !cm || len(objs) != 2 || resp.SourceType != "Plugin" {
						t.Fatalf("plugin %+v: %s manifests %v, want Secret/db and ConfigMap/settings", plugin, resp.SourceType, resp.Manifests)
					}
					data, _ := sec["stringData"].(map[string]any)
					if data["password"] != planted || sec["sops"] != nil {
						t.Errorf("plugin %+v (empty: discovery by .sops.yaml): Secret %v, want the planted password and no sops metadata", plugin, sec)
					}
				}
			})
			t.Run("sops with a wrong key: its error, no secret in it", func(t *testing.T) {
				wrong := sopstest.NewKey(t, bin)
				setAgeKey(t, s.ns, wrong)
				// As the kubelet refreshes a Secret volume.
				if err := rs.Pod.Project(); err != nil {
					t.Fatal(err)
				}
				_, err := s.generate(rs, "db", "sops", &argoPlugin{Name: "sops"})
				setAgeKey(t, s.ns, key)
				if perr := rs.Pod.Project(); perr != nil {
					t.Fatal(perr)
				}
				if err == nil || !strings.Contains(err.Error(), "sops could not decrypt secret.yaml") {
					t.Fatalf("err %v, want sops's failure", err)
				}
				t.Logf("Argo CD says: %s", err)
				sopstest.NotLeaked(t, "Argo CD's error", err.Error(), key, planted)
				sopstest.NotLeaked(t, "Argo CD's error (the wrong key)", err.Error(), wrong, "")
			})
			t.Run("helm, kustomize and kustomize-helm", func(t *testing.T) { renderChartsAndKustomizations(t, s, rs) })
			t.Run("tanka: an environment with top-level arguments", func(t *testing.T) {
				resp, err := s.generate(rs, "grafana", "tanka/environments/default", &argoPlugin{Name: "tanka", Parameters: []argoParam{
					{Name: "tlas", Map: map[string]string{"replicas": "2", "tag": "11.1.0"}},
				}})
				if err != nil {
					t.Fatal(err)
				}
				objs := objectsByName(t, resp.Manifests)
				d, ok := objs["Deployment/grafana"]
				spec, _ := d["spec"].(map[string]any)
				meta, _ := d["metadata"].(map[string]any)
				if _, svc := objs["Service/grafana"]; !ok || !svc || spec["replicas"] != float64(2) || meta["namespace"] != "monitoring" {
					t.Errorf("manifests %v, want Deployment/grafana (2 replicas, namespace monitoring) and Service/grafana", resp.Manifests)
				}
			})
			t.Run("ytt with a data values file and typed values", func(t *testing.T) {
				resp, err := s.generate(rs, "shop", "ytt/app", &argoPlugin{Name: "ytt", Parameters: []argoParam{
					{Name: "data-values-files", Array: []string{"../envs/prod.yml"}},
					{Name: "data-values", Map: map[string]string{"name": "web"}},
					{Name: "data-values-yaml", Map: map[string]string{"replicas": "4"}},
				}})
				if err != nil {
					t.Fatal(err)
				}
				d, ok := objectsByName(t, resp.Manifests)["Deployment/web"]
				spec, _ := d["spec"].(map[string]any)
				if !ok || spec["replicas"] != float64(4) || resp.SourceType != "Plugin" {
					t.Errorf("%s manifests %v, want Deployment/web with 4 replicas", resp.SourceType, resp.Manifests)
				}
				_, err = s.generate(rs, "shop", "ytt/app", &argoPlugin{Name: "ytt", Parameters: []argoParam{
					{Name: "data-values", Map: map[string]string{"replicas": "three"}}}})
				if err == nil || !strings.Contains(err.Error(), "expected: integer") {
					t.Errorf("err %v, want ytt's schema error", err)
				}
				t.Logf("Argo CD says: %v", err)
			})
			t.Run("cdk8s: the TypeScript app found by cdk8s.yaml, its env from a parameter", func(t *testing.T) { renderCdk8s(t, s, rs) })
			t.Run("neither the key nor the value in any process's log", func(t *testing.T) {
				for _, p := range rs.Pod.Processes() {
					sopstest.NotLeaked(t, "the log of "+p.Name, p.Output(), key, planted)
				}
				// Every process of this test binary: apiserver, injector,
				// repo-servers, every sidecar.
				all, err := os.ReadFile(env.logFile.Name())
				if err != nil {
					t.Fatal(err)
				}
				sopstest.NotLeaked(t, "the processes' log", string(all), key, planted)
			})
		})
	}
}

// TestLibraryImagesCarryTheServer: the library's entries say their images
// carry cmp-server (serverPath), so a repo-server pod of library plugins,
// stored by the real kube-apiserver, has no copy init container and no
// var-files of the injector's; each sidecar runs, and gates on, the server
// at the image's path (here the build's cmp-server, mapped as the image's
// /usr/local/bin/cmp-server), and Argo CD's repo-server renders through
// them. One plugin whose image does not carry it (trivial-cmp, busybox)
// keeps the copy for the whole pod.
func TestLibraryImagesCarryTheServer(t *testing.T) {
	s := startLibrary(t, []string{"kustomize", "trivial-cmp"})
	rel := s.rels[0]
	rs, stored := s.bootRepoServer(t, rel, "helm, kustomize", "srv")
	st := status(t, stored)
	inits, _ := containerNames(stored)
	if slices.Contains(inits, keys.CopyInitContainer) || slices.Contains(st.InitContainers, keys.CopyInitContainer) || slices.Contains(st.Volumes, keys.VarFilesVolume) {
		t.Errorf("a pod of library plugins got the copy: init containers %v, status %+v", inits, st)
	}
	for _, c := range stored.Spec.InitContainers {
		if !isSidecarOf(c.Name, st.Plugins) {
			continue
		}
		gate := c.Lifecycle.PostStart.Exec.Command
		if !slices.Equal(c.Command, []string{keys.CopyServerBinary}) || gate[0] != keys.CopyServerBinary {
			t.Errorf("%s runs %v and gates on %v, want the image's %s", c.Name, c.Command, gate, keys.CopyServerBinary)
		}
		for _, m := range c.VolumeMounts {
			if m.Name == keys.VarFilesVolume {
				t.Errorf("%s mounts %s", c.Name, m.Name)
			}
		}
	}
	// Argo CD's repo-server renders through both, each named.
	for _, tc := range []struct{ plugin, app, path, want string }{
		{"helm", "shop", "kustomize-helm/charts/hello", "ConfigMap/shop-hello"},
		{"kustomize", "web", "kustomize", "Deployment/web"},
	} {
		resp, err := s.generate(rs, tc.app, tc.path, &argoPlugin{Name: tc.plugin})
		if err != nil {
			t.Fatalf("%s: %v", tc.plugin, err)
		}
		if _, ok := objectsByName(t, resp.Manifests)[tc.want]; !ok || resp.SourceType != "Plugin" {
			t.Errorf("%s: %s manifests %v, want %s", tc.plugin, resp.SourceType, resp.Manifests, tc.want)
		}
	}

	t.Run("one plugin without serverPath keeps the copy", func(t *testing.T) {
		mixed, err := env.cp.Client().CreatePod(s.ns, repoServerPod(t, "repo-server-mixed", rel.Image(), "helm, trivial-cmp"), true)
		if err != nil {
			t.Fatal(err)
		}
		inits, _ := containerNames(mixed)
		if !slices.Contains(inits, keys.CopyInitContainer) {
			t.Errorf("init containers %v, want %s", inits, keys.CopyInitContainer)
		}
		for _, c := range mixed.Spec.InitContainers {
			if isSidecarOf(c.Name, []string{"helm", "trivial-cmp"}) && !slices.Equal(c.Command, []string{keys.PluginServerPath}) {
				t.Errorf("%s runs %v, want the copy %s", c.Name, c.Command, keys.PluginServerPath)
			}
		}
	})
}

// isSidecarOf reports whether container name is the sidecar of one of plugins.
func isSidecarOf(name string, plugins []string) bool {
	return slices.ContainsFunc(plugins, func(p string) bool { return keys.SidecarName(p) == name })
}

// libraryPlugins are the plugins TestPluginLibrary's repo-server asks for.
var libraryPlugins = []string{"jsonnet", "sops", "helm", "kustomize", "kustomize-helm", "ytt", "tanka", "cdk8s"}

// renderChartsAndKustomizations renders the helm, kustomize and kustomize-helm
// plugins' test apps through the repo-server rs: each named, and each found by
// Argo CD's discovery (a kustomization listing helmCharts matches both
// kustomize plugins; kustomize-helm's socket sorts first and must win).
func renderChartsAndKustomizations(t *testing.T, s *libraryStack, rs *harness.RepoServer) {
	t.Run("helm with helm-parameters and a release name", func(t *testing.T) {
		resp, err := s.generate(rs, "shop", "kustomize-helm/charts/hello", &argoPlugin{Name: "helm", Parameters: []argoParam{
			{Name: "release-name", String: strPtr("rel")},
			{Name: "helm-parameters", Map: map[string]string{"greeting": "a, b", "image.tag": "11"}},
			{Name: "helm-string-parameters", Map: map[string]string{"image.tag": "11"}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		cm, ok := objectsByName(t, resp.Manifests)["ConfigMap/rel-hello"]
		want := map[string]any{"greeting": "a, b", "replicas": "1", "tag": "11", "tag-kind": "string"}
		if !ok || !reflect.DeepEqual(cm["data"], want) || resp.SourceType != "Plugin" {
			t.Errorf("%s manifests %v, want ConfigMap/rel-hello with %v", resp.SourceType, resp.Manifests, want)
		}
	})
	for _, plugin := range []*argoPlugin{{Name: "kustomize", Parameters: []argoParam{
		{Name: "name-prefix", String: strPtr("team-")},
		{Name: "images", Array: []string{"nginx=registry.example.com/nginx:1.27", "busybox:1.37"}},
	}}, {}} {
		t.Run("kustomize "+nameOrDiscovery(plugin), func(t *testing.T) {
			resp, err := s.generate(rs, "web", "kustomize", plugin)
			if err != nil {
				t.Fatal(err)
			}
			objs := objectsByName(t, resp.Manifests)
			prefix, images := "", []string{"nginx:1.25", "busybox:1.36"}
			if plugin.Name != "" {
				prefix, images = "team-", []string{"registry.example.com/nginx:1.27", "busybox:1.37"}
			}
			dep, ok := objs["Deployment/"+prefix+"web"]
			if _, cm := objs["ConfigMap/"+prefix+"settings"]; !ok || !cm || len(objs) != 2 || resp.SourceType != "Plugin" {
				t.Fatalf("plugin %+v: %s manifests %v", plugin, resp.SourceType, resp.Manifests)
			}
			var got []string
			for _, c := range dep["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any) {
				got = append(got, fmt.Sprint(c.(map[string]any)["image"]))
			}
			if !reflect.DeepEqual(got, images) {
				t.Errorf("plugin %+v: images %q, want %q", plugin, got, images)
			}
		})
	}
	t.Run("kustomize's error is what Argo CD reports", func(t *testing.T) {
		_, err := s.generate(rs, "web", "kustomize", &argoPlugin{Name: "kustomize", Parameters: []argoParam{
			{Name: "images", Array: []string{"x y"}},
		}})
		if err == nil || !strings.Contains(err.Error(), "parameter images: Error: invalid format of image") {
			t.Errorf("err %v, want kustomize's refusal of the image", err)
		}
	})
	for _, plugin := range []*argoPlugin{{Name: "kustomize-helm-proxy-cmp-v1.0", Parameters: []argoParam{
		{Name: "name-suffix", String: strPtr("-s")},
	}}, {}} {
		t.Run("kustomize-helm "+nameOrDiscovery(plugin), func(t *testing.T) {
			resp, err := s.generate(rs, "demo", "kustomize-helm", plugin)
			if err != nil {
				t.Fatal(err)
			}
			name := "ConfigMap/demo-hello"
			if plugin.Name != "" {
				name += "-s"
			}
			cm, ok := objectsByName(t, resp.Manifests)[name]
			want := map[string]any{"greeting": "from-kustomization", "replicas": "1", "tag": "10", "tag-kind": "string"}
			if !ok || !reflect.DeepEqual(cm["data"], want) || resp.SourceType != "Plugin" {
				t.Errorf("plugin %+v: %s manifests %v, want %s with %v", plugin, resp.SourceType, resp.Manifests, name, want)
			}
		})
	}
}

// nameOrDiscovery names a subtest by the plugin the Application asks for.
func nameOrDiscovery(p *argoPlugin) string {
	if p.Name == "" {
		return "found by discovery"
	}
	return "named " + p.Name
}

// setAgeKey creates or replaces the Secret the sops catalog entry mounts.
func setAgeKey(t *testing.T, ns string, key sopstest.Key) {
	t.Helper()
	data, err := os.ReadFile(key.File)
	if err != nil {
		t.Fatal(err)
	}
	secret := map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "sops-age"},
		"data": map[string]any{"keys.txt": base64.StdEncoding.EncodeToString(data)}}
	if err := env.cp.Client().Apply("/api/v1/namespaces/"+ns+"/secrets", "sops-age", secret); err != nil {
		t.Fatal(err)
	}
}

// renderCdk8s renders the cdk8s test apps through the repo-server rs: cdk8s's
// getting-started app in TypeScript (npx ts-node, no node_modules in the
// repository) named with an env parameter and found by discovery
// (cdk8s.yaml), and an app whose construct throws, whose error Argo CD
// reports.
func renderCdk8s(t *testing.T, s *libraryStack, rs *harness.RepoServer) {
	t.Helper()
	for _, c := range []struct {
		plugin   *argoPlugin
		replicas float64
	}{
		{&argoPlugin{Name: "cdk8s", Parameters: []argoParam{{Name: "env", Map: map[string]string{"REPLICAS": "3"}}}}, 3},
		{&argoPlugin{}, 1},
	} {
		resp, err := s.generate(rs, "hello", "cdk8s/hello", c.plugin)
		if err != nil {
			t.Fatalf("plugin %+v: %v", c.plugin, err)
		}
		objs := objectsByName(t, resp.Manifests)
		d, ok := objs["Deployment/hello-deployment-c86af7a3"]
		spec, _ := d["spec"].(map[string]any)
		if _, svc := objs["Service/hello"]; !ok || !svc || len(objs) != 2 || spec["replicas"] != c.replicas || resp.SourceType != "Plugin" {
			t.Errorf("plugin %+v (empty: discovery by cdk8s.yaml): %s manifests %v, want the Deployment with %v replicas and Service/hello",
				c.plugin, resp.SourceType, resp.Manifests, c.replicas)
		}
	}
	_, err := s.generate(rs, "broken", "cdk8s/broken", &argoPlugin{Name: "cdk8s"})
	if err == nil || !strings.Contains(err.Error(), "PodSpec must have at least 1 container") {
		t.Fatalf("err %v, want cdk8s-plus's refusal", err)
	}
	t.Logf("Argo CD says: %v", err)
}
