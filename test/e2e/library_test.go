package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// The plugin library (deploy/plugins/<name>/) through Argo CD's own
// repo-server: the example catalog's entry injected into a repo-server pod
// shaped like Argo CD's, the pod booted with each pinned release, an
// Application of the library's test repository rendered by GenerateManifest.
// The sidecar runs the cmp-server built for this run and the pinned tool of
// bin/, the two binaries the plugin's image holds (hack/images checks that the
// image's tool is bin/'s, byte for byte).

// libraryRedisSecret is the Redis password of the library's repo-servers.
const libraryRedisSecret = "library-redis-password"

// libraryRepo is the test repository: the plugins' own test apps.
var libraryRepo = filepath.Join("..", "..", "deploy", "plugins", "testdata")

// libraryStack is what every library case shares: a namespace where the
// injector serves the example catalog, Argo CD's objects and Redis in it, and
// the test repository.
type libraryStack struct {
	ns, redis, repoURL, commit string
	rels                       []harness.ArgoRelease
}

// startLibrary starts the injector with the example catalog enabling plugins
// (and helm, which waitActive's probe pod asks for) and everything a
// repo-server needs in a fresh namespace.
func startLibrary(t *testing.T, plugins ...string) *libraryStack {
	t.Helper()
	rels, err := harness.ArgoReleases()
	if err != nil {
		t.Fatal(err)
	}
	startInjector(t, catalogFor(t, true, map[string][]string{"*": append([]string{"helm"}, plugins...)}))
	ns := newNamespace(t, "library", enabledNS)
	waitActive(t, ns)
	redis, err := harness.StartRedis(filepath.Join(t.TempDir(), "redis"), libraryRedisSecret, env.logFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = redis.Stop() })
	c := env.cp.Client()
	if err := c.ApplyFile(ns, filepath.Join("testdata", "chain", "argocd-config.yaml"),
		map[string]string{"REDIS_ADDRESS": redis.Addr, "REDIS_PASSWORD": libraryRedisSecret}); err != nil {
		t.Fatal(err)
	}
	repoURL, commit, err := harness.GitRepo(filepath.Join(t.TempDir(), "git"), libraryRepo)
	if err != nil {
		t.Fatal(err)
	}
	return &libraryStack{ns: ns, redis: redis.Addr, repoURL: repoURL, commit: commit, rels: rels}
}

// bootRepoServer creates a repo-server pod of release rel asking for plugins
// (the pod template of Argo CD's Deployment, testdata/chain), lets the
// webhook inject it, and boots what the apiserver stored.
func (s *libraryStack) bootRepoServer(t *testing.T, rel harness.ArgoRelease, plugins, dir string) (*harness.RepoServer, *corev1.Pod) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "chain", "argocd-repo-server.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var dep struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &dep); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: dep.Spec.Template.ObjectMeta, Spec: dep.Spec.Template.Spec}
	pod.Name = "repo-server-" + dir
	pod.Labels[keys.InjectLabel] = keys.EnabledValue
	pod.Annotations = map[string]string{keys.PluginsAnnotation: plugins}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			cs[i].Image = rel.Image()
		}
	}
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
	req := manifestRequest{
		Repo: &argoRepo{Repo: s.repoURL}, Revision: "HEAD", NoCache: true,
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
	s := startLibrary(t, "jsonnet")
	for i, rel := range s.rels {
		t.Run("Argo CD "+rel.Version, func(t *testing.T) {
			rs, stored := s.bootRepoServer(t, rel, "jsonnet", "lib"+strconv.Itoa(i))
			if st := status(t, stored); !reflect.DeepEqual(st.Plugins, []string{"jsonnet"}) {
				t.Fatalf("pod injected with %v, want [jsonnet]", st.Plugins)
			}
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
		})
	}
}
