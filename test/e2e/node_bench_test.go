package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// The real node's figures (`make bench-node`, root): what users wait for on a
// node, side by side in one run, on containerd, runc and the kubelet:
//
//  1. pod start: pod creation → each container's first process → the
//     repo-server's → the pod Ready, for 0, 1 and 4 plugins injected and for
//     the same plugins as Argo CD's documented hand-written sidecars; beside
//     them the injected pods without the start gate and the plugins as
//     regular containers, which tell the gate's cost from the kubelet's
//     (node_bench_gate_test.go);
//  2. GenerateManifest through Argo CD's repo-server for a 1,000- and a
//     5,000-file repository with the plugin's /tmp on a disk-backed emptyDir
//     and on medium Memory;
//  3. each container's memory from its cgroup, idle and after 20 requests
//     per plugin, the 4-plugin pod injected against Argo CD's sidecars.
//
// Nothing asserts a time: it prints tables. It never runs in `make e2e-node`
// or `make test`: only with E2E_NODE_BENCH=1, which `make bench-node` sets.

const (
	nodeBenchEnv = "E2E_NODE_BENCH"
	// nodeBenchPodsEnv raises the pods per configuration (default 5).
	nodeBenchPodsEnv = "E2E_NODE_BENCH_PODS"
	// nodeBenchStartEnv, a regular expression, keeps only the pod-start
	// configurations whose names it matches (the first, no plugins, is the
	// anchor and always runs): one row measured without the whole part.
	nodeBenchStartEnv = "E2E_NODE_BENCH_START"
	// nodeBenchRunsEnv is the GenerateManifest requests per repository and
	// medium (default 5, after one warm-up request).
	nodeBenchRunsEnv = "E2E_NODE_BENCH_RUNS"
	// benchRequests is part 3's requests per plugin (issue 28).
	benchRequests = 20
	// repoServerName is the repo-server container's name in the template.
	repoServerName = "argocd-repo-server"
)

func TestNodeBench(t *testing.T) {
	if os.Getenv(nodeBenchEnv) != "1" {
		t.Skipf("the node bench runs only from `make bench-node` (%s=1)", nodeBenchEnv)
	}
	skipUnsupportedSkew(t)
	pods, runs := envCount(t, nodeBenchPodsEnv, 5), envCount(t, nodeBenchRunsEnv, 5)
	rel, err := harness.NewestArgoRelease()
	if err != nil {
		t.Fatal(err)
	}
	node := benchNode(t, rel)
	c := env.cp.Client()
	steps, err := harness.ReadReadme(env.repo)
	if err != nil {
		t.Fatal(err)
	}
	chart, err := env.cp.InstallChart(env.bins["cmp-injector"], filepath.Join(env.root, "bench-helm"), env.logFile,
		"-f", filepath.Join("testdata", "chain", "values.yaml"), "-f", benchValues(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = chart.Uninstall() })
	redis, err := node.StartRedis(filepath.Join(env.root, "bench-redis"), redisSecret)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = redis.Stop() })

	// The repositories, in one host directory mounted into every pod.
	gitDir := filepath.Join(env.root, "bench-git")
	repos := map[int]benchRepoRef{}
	for _, files := range []int{1000, 5000} {
		url, commit := benchRepo(t, filepath.Join(gitDir, strconv.Itoa(files)), files)
		repos[files] = benchRepoRef{files, url, commit}
	}
	// The repo-server runs as 999: git refuses a repository another user owns.
	if out, err := exec.Command("chown", "-R", "999:999", gitDir).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v %s", err, out)
	}

	if err := c.CreateNamespace(chainNS, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyFile(chainNS, filepath.Join("testdata", "chain", "argocd-config.yaml"),
		map[string]string{"REDIS_ADDRESS": redis.Addr, "REDIS_PASSWORD": redisSecret}); err != nil {
		t.Fatal(err)
	}
	if err := c.MergePatch("/api/v1/namespaces/"+chainNS, steps.LabelPatch()); err != nil {
		t.Fatal(err)
	}
	waitActive(t, chainNS)
	tmpl := repoServerTemplate(t, steps.Patch, rel, gitDir)
	// What the webhook makes of the 4-plugin pod (a dry run stores nothing):
	// the hand-written sidecars take their images and plugin.yaml from it.
	injected, err := c.CreatePod(chainNS, benchPod(tmpl, "bench-dry-run", true, benchPlugins), true)
	if err != nil {
		t.Fatal(err)
	}
	applyArgoPluginConfigs(t, injected, benchPlugins)
	b := &nodeBench{t: t, node: node, rel: rel}
	fmt.Printf("\n== make bench-node: Argo CD %s, kubelet v1.%d, %s, %d pods per configuration\n",
		rel.Version, kubeletMinor, time.Now().UTC().Format("2006-01-02 15:04 UTC"), pods)

	t.Run("pod start", func(t *testing.T) {
		b.t = t
		one := benchPlugins[:1]
		injectedOne, err := c.CreatePod(chainNS, benchPod(tmpl, "bench-dry-run-1", true, one), true)
		if err != nil {
			t.Fatal(err)
		}
		configs := []startConfig{
			{"no plugins", func(n string) *corev1.Pod { return benchPod(tmpl, n, false, nil) }},
			{"injected, 1 plugin", func(n string) *corev1.Pod { return benchPod(tmpl, n, true, one) }},
			{"injected, 4 plugins", func(n string) *corev1.Pod { return benchPod(tmpl, n, true, benchPlugins) }},
			// Every image carries cmp-server: no copy init container.
			{libraryStart, func(n string) *corev1.Pod { return benchPod(tmpl, n, true, benchLibraryPlugins) }},
			// Whose is each native sidecar's second (node_bench_gate_test.go).
			{"injected, 1 plugin, no gate", func(n string) *corev1.Pod { return gateFreePod(injectedOne, n) }},
			{"injected, 4 plugins, no gate", func(n string) *corev1.Pod { return gateFreePod(injected, n) }},
			{"4 plugins regular, gated", func(n string) *corev1.Pod { return regularLayoutPod(injected, n) }},
			{"Argo CD's sidecars, 1 plugin", func(n string) *corev1.Pod {
				return argoSidecars(benchPod(tmpl, n, false, nil), injected, one)
			}},
			{"Argo CD's sidecars, 4 plugins", func(n string) *corev1.Pod {
				return argoSidecars(benchPod(tmpl, n, false, nil), injected, benchPlugins)
			}},
		}
		before, err := node.PLEGRelists()
		if err != nil {
			t.Fatal(err)
		}
		configs = selectStarts(t, configs)
		b.podStart(configs, pods)
		after, err := node.PLEGRelists()
		if err != nil {
			t.Fatal(err)
		}
		printRelists(after.Minus(before))
	})

	t.Run("pod start, regular layout with a plugin that never listens", func(t *testing.T) {
		b.t = t
		b.regularLayoutFailure(injected)
	})

	t.Run("GenerateManifest, plugin /tmp on disk and in memory", func(t *testing.T) {
		b.t = t
		disk := b.create(benchPod(tmpl, "bench-tmp-disk", true, benchPlugins[:1]))
		memory := b.create(benchPod(tmpl, "bench-tmp-memory", true, []string{memoryPlugin}))
		b.tmpMedia([]*corev1.Pod{disk, memory}, []string{benchPlugins[0], memoryPlugin}, []benchRepoRef{repos[1000], repos[5000]}, runs)
		b.remove(disk, memory)
	})

	t.Run("memory from the cgroups, idle and after requests", func(t *testing.T) {
		b.t = t
		ours := b.create(benchPod(tmpl, "bench-mem-injected", true, benchPlugins))
		argo := b.create(argoSidecars(benchPod(tmpl, "bench-mem-argo", false, nil), injected, benchPlugins))
		b.memory(ours, argo, repos[1000])
		b.remove(ours, argo)
	})
}

// benchRepoRef is one generated repository.
type benchRepoRef struct {
	files       int
	url, commit string
}

// nodeBench runs the parts on one node.
type nodeBench struct {
	t    *testing.T
	node *harness.Node
	rel  harness.ArgoRelease
}

// envCount reads a positive count from the environment, or def.
func envCount(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// benchNode builds the images TestRealNode runs (nothing is pulled) and
// starts the node.
func benchNode(t *testing.T, rel harness.ArgoRelease) *harness.Node {
	t.Helper()
	node, err := harness.StartNode(env.cp, filepath.Join(env.root, "node"), nodeImages(t, rel), env.logFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Stop)
	return node
}

// create stores pod (through the webhook when it opts in) and waits until
// the kubelet reports it Ready.
func (b *nodeBench) create(pod *corev1.Pod) *corev1.Pod {
	b.t.Helper()
	if _, err := env.cp.Client().CreatePod(chainNS, pod, false); err != nil {
		b.t.Fatal(err)
	}
	ready, _ := b.waitReady(pod.Name)
	return ready
}

// waitReady polls the pod every 50 ms until it is Ready and returns it with
// the moment it was first seen Ready; a container that will never start ends
// the test with its log.
func (b *nodeBench) waitReady(name string) (*corev1.Pod, time.Time) {
	b.t.Helper()
	c := env.cp.Client()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		pod, err := c.GetPod(chainNS, name)
		if err == nil {
			for _, cond := range pod.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					return pod, time.Now()
				}
			}
			for _, s := range harness.AllStatuses(pod) {
				if w := s.State.Waiting; w != nil && harness.FatalWaiting(w.Reason) {
					b.t.Fatalf("pod %s: container %s: %s: %s\n%s", name, s.Name, w.Reason, w.Message, b.node.ContainerLogs(pod)[s.Name])
				}
			}
		}
		if time.Now().After(deadline) {
			_, werr := b.node.WaitPodReady(c, chainNS, name, time.Second)
			b.t.Fatalf("pod %s not Ready after 3 minutes: %v %v", name, err, werr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// remove deletes the pods and waits until the kubelet has stopped them and
// the API no longer has them, then a second for the sandboxes' teardown, so
// the next measurement does not share the CPU with it.
func (b *nodeBench) remove(pods ...*corev1.Pod) {
	b.t.Helper()
	c := env.cp.Client()
	for _, p := range pods {
		if err := c.Delete("/api/v1/namespaces/" + chainNS + "/pods/" + p.Name); err != nil {
			b.t.Fatal(err)
		}
	}
	for _, p := range pods {
		err := harness.Eventually(2*time.Minute, 100*time.Millisecond, func() (bool, error) {
			_, err := c.GetPod(chainNS, p.Name)
			var apiErr *harness.APIError
			if errors.As(err, &apiErr) && apiErr.Code == http.StatusNotFound {
				return true, nil
			}
			return false, fmt.Errorf("pod %s still exists (%w)", p.Name, err)
		})
		if err != nil {
			b.t.Fatal(err)
		}
	}
	time.Sleep(time.Second)
}

// generate asks pod's repo-server for plugin's manifests of repo and returns
// the wall time of the call (repoclient's, from the node's network).
func (b *nodeBench) generate(rs *harness.RepoServer, repo benchRepoRef, plugin string) (time.Duration, error) {
	req := manifestRequest{Repo: &argoRepo{Repo: repo.url}, Revision: "HEAD", NoCache: true,
		AppName: "bench", Namespace: "demo", KubeVersion: kubeVersion(), APIVersions: []string{"v1", "apps/v1"},
		ProjectName: "default", ProjectSourceRepos: []string{"*"},
		ApplicationSource: &argoSource{RepoURL: repo.url, Path: benchAppPath[plugin], TargetRevision: "HEAD", Plugin: &argoPlugin{Name: plugin}}}
	var resp manifestResponse
	start := time.Now()
	err := rs.Call("generate", req, &resp)
	took := time.Since(start)
	if err == nil && resp.Revision != repo.commit {
		err = fmt.Errorf("revision %q, want %s", resp.Revision, repo.commit)
	}
	return took, err
}

// repoServer is pod's repo-server, at its pod address.
func (b *nodeBench) repoServer(pod *corev1.Pod) *harness.RepoServer {
	b.t.Helper()
	rs, err := harness.NodeRepoServer(b.node, pod, b.rel)
	if err != nil {
		b.t.Fatal(err)
	}
	return rs
}

// sidecarName is the container serving plugin in pod: ours, or else the
// hand-written one.
func sidecarName(pod *corev1.Pod, plugin string) string {
	if findContainer(pod, keys.SidecarName(plugin)).Name != "" {
		return keys.SidecarName(plugin)
	}
	return plugin
}
