package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// The real node: the chain of TestRealChain, but the repo-server pod is run by
// a real kubelet (containerd, runc, the CNI bridge) from images built on this
// machine, so the kubelet's own behaviour is under test: init container order,
// native sidecars gated by their postStart hook, the downwardAPI projection and
// its live update, users, shared volumes, pod networking and deletion.
// `make e2e-node` runs it (as root); `make e2e` skips it.

// kubeletMinor is the pinned kubelet's minor (hack/tools.sh KUBELET_VERSION).
const kubeletMinor = 34

// skipUnsupportedSkew skips a real-node test when the apiserver and the pinned
// kubelet are a skew Kubernetes does not support: a kubelet newer than its
// apiserver, or more than three minors older.
func skipUnsupportedSkew(t *testing.T) {
	t.Helper()
	var major, minor int
	if _, err := fmt.Sscanf(env.k8sVer, "v%d.%d", &major, &minor); err != nil {
		t.Fatalf("apiserver version %q: %v", env.k8sVer, err)
	}
	if minor < kubeletMinor || minor > kubeletMinor+3 {
		t.Skipf("the real node's kubelet is v1.%d and the apiserver %s, a skew Kubernetes does not support: `make e2e-node` runs it against the pinned apiserver", kubeletMinor, env.k8sVer)
	}
}

// nodeImages builds the image archives a real node runs: ours from
// hack/images, every other one from this machine's files (nothing is pulled).
func nodeImages(t *testing.T, rel harness.ArgoRelease) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	archives, err := harness.BuildProductImages(ctx, filepath.Join(env.root, "product-images"))
	if err != nil {
		t.Fatal(err)
	}
	test, err := harness.BuildTestImages(ctx, filepath.Join(env.root, "test-images"), map[harness.ImageKind][]string{
		harness.PauseImage: {harness.SandboxImage},
		harness.ShellImage: {"registry.example/e2e/shell:1"},
		// The example catalog's plugins run the library's images, built by
		// hack/images with the product images.
		harness.ArgoCDImage: {rel.Image()},
	}, rel)
	if err != nil {
		t.Fatal(err)
	}
	return append(archives, test...)
}

func TestRealNode(t *testing.T) {
	skipUnsupportedSkew(t)
	before, err := harness.SnapshotHost()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := harness.NewestArgoRelease()
	if err != nil {
		t.Fatal(err)
	}

	// 1. Images: ours from hack/images, every other one from this machine's
	// files. Nothing is pulled.
	t0 := time.Now()
	images := nodeImages(t, rel)
	t.Logf("images built in %s", time.Since(t0).Round(time.Millisecond))

	// 2. The node. The host check is registered first so it runs last, after
	// the node is gone.
	t.Cleanup(func() {
		after, err := harness.SnapshotHost()
		if err != nil {
			t.Error(err)
			return
		}
		if d := before.Diff(after); len(d) > 0 {
			t.Errorf("the node left the host changed:\n  %s", strings.Join(d, "\n  "))
		} else {
			t.Logf("host unchanged: %d sysctls, %d firewall rules, %d links, %d mounts compared",
				len(after.Sysctls), len(after.Firewall), len(after.Links), len(after.Mounts))
		}
	})
	t1 := time.Now()
	node, err := harness.StartNode(env.cp, filepath.Join(env.root, "node"), images, env.logFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Stop)
	t.Logf("containerd + kubelet: node %s Ready in %s", node.Name, time.Since(t1).Round(time.Millisecond))

	// 3. helm install and Argo CD's side, as in TestRealChain, with Redis in
	// the node's network and the Git repository mounted from the host.
	c := env.cp.Client()
	steps, err := harness.ReadReadme(env.repo)
	if err != nil {
		t.Fatal(err)
	}
	chart, err := env.cp.InstallChart(env.bins["cmp-injector"], filepath.Join(env.root, "node-helm"), env.logFile,
		"-f", filepath.Join("testdata", "chain", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = chart.Uninstall() })
	redis, err := node.StartRedis(filepath.Join(env.root, "node-redis"), redisSecret)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = redis.Stop() })
	gitDir := filepath.Join(env.root, "node-git")
	repoURL, commit, err := harness.GitRepo(gitDir, filepath.Join("testdata", "repo"), filepath.Join("testdata", "chain", "repo"), libraryRepo)
	if err != nil {
		t.Fatal(err)
	}
	// The repo-server runs as 999: git refuses a repository another user owns.
	if out, err := exec.Command("chown", "-R", "999:999", gitDir).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v %s", err, out)
	}
	applyArgoCD(t, redis.Addr, rel)
	// What a cluster's scheduler would decide, and the repository: nodeName
	// (no scheduler runs) and a hostPath volume at the repository's path. The
	// short grace: Argo CD's own argocd-cmp-server ignores SIGTERM, and each
	// rollout would wait 30 s for it.
	patchDeployment(t, fmt.Sprintf(`{"spec":{"template":{"spec":{"nodeName":%q,"terminationGracePeriodSeconds":5,
		"containers":[{"name":%q,"volumeMounts":[{"name":"e2e-git","mountPath":%q,"readOnly":true}]}],
		"volumes":[{"name":"e2e-git","hostPath":{"path":%q,"type":"Directory"}}]}}}}`,
		harness.NodeName, repoServer, gitDir, gitDir), true)
	addArgoSidecar(t, rel.Image())

	// 4. The README's commands, then every plugin the cases use.
	if err := c.MergePatch("/api/v1/namespaces/"+chainNS, steps.LabelPatch()); err != nil {
		t.Fatal(err)
	}
	waitActive(t, chainNS)
	patchDeployment(t, string(steps.Patch), false)
	gen := patchDeployment(t, `{"spec":{"template":{"metadata":{"annotations":{
		"cmp-injector.io/plugins":"helm, kustomize, params, broken, intruder"}}}}}`, false)
	r := waitRollout(t, gen, 1)
	t2 := time.Now()
	pod, err := node.WaitPodReady(c, chainNS, r.Pods[0].Name, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("injected pod %s Ready on the node %s after it was stored (IP %s)", pod.Name, time.Since(t2).Round(time.Millisecond), pod.Status.PodIP)

	t.Run("the kubelet ran the injected pod as designed", func(t *testing.T) {
		checkNativeStart(t, pod)
		uids, err := node.ProcessUIDs(pod)
		if err != nil {
			t.Fatal(err)
		}
		for name, list := range uids {
			for _, uid := range list {
				if uid != 999 {
					t.Errorf("container %s runs a process as uid %d, want 999", name, uid)
				}
			}
		}
		if len(uids) < len(status(t, pod).Plugins)+1 {
			t.Errorf("found processes of %d containers, want the repo-server and every sidecar: %v", len(uids), uids)
		}
		t.Logf("process uids: %v", uids)
	})

	rs, err := harness.NodeRepoServer(node, pod, rel)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("Argo CD "+rel.Version, func(t *testing.T) { argoCases(t, rs, rel, repoURL, commit) })

	t.Run("a plugin's command reaches no other plugin's socket and not the repo-server's /dev/shm", func(t *testing.T) {
		checkIsolationOnNode(t, node, rs, pod, repoURL)
	})

	t.Run("install-path pods: argo-helm's repo-server, and with an OpenShift-style UID", func(t *testing.T) {
		checkInstallPathPodsOnNode(t, node)
	})

	t.Run("the repo-server starts once every plugin answers, 1 and 4 plugins", func(t *testing.T) {
		checkStartOrder(t, node)
	})

	t.Run("a plugin whose server cannot start holds the pod and says why", func(t *testing.T) {
		checkFailingPlugin(t, node)
	})

	t.Run("a catalog change reaches the running sidecar through the reconciler and the kubelet", func(t *testing.T) {
		checkLiveReload(t, node, chart, rs, pod, repoURL)
	})

	// 5. Classic sidecars: the catalog says so, a restart rolls the
	// Deployment, and the kubelet stops the old pod.
	t.Run("classic sidecars on a new pod; the old pod drains", func(t *testing.T) {
		if err := chart.Upgrade("--set", "catalog.nativeSidecars=false", "--set", "catalog.revision=classic"); err != nil {
			t.Fatal(err)
		}
		old := pod
		classic := rollToRevision(t, "", "classic")
		inits, mains := containerNames(classic)
		t.Logf("classic pod %s: init containers %v, containers %v", classic.Name, inits, mains)
		ready, err := node.WaitPodReady(c, chainNS, classic.Name, 3*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		checkSidecarsClassic(t, ready)
		rs, err := harness.NodeRepoServer(node, ready, rel)
		if err != nil {
			t.Fatal(err)
		}
		var resp manifestResponse
		if err := rs.Call("generate", manifestRequest{Repo: &argoRepo{Repo: repoURL}, Revision: "HEAD", NoCache: true,
			AppName: "classic", Namespace: "demo", KubeVersion: kubeVersion(), ProjectName: "default", ProjectSourceRepos: []string{"*"},
			ApplicationSource: &argoSource{RepoURL: repoURL, Path: "apps/params", TargetRevision: "HEAD", Plugin: &argoPlugin{Name: "params"}}}, &resp); err != nil {
			t.Fatal(err)
		}
		if len(resp.Manifests) != 1 || resp.Revision != commit {
			t.Errorf("the classic pod rendered %v at %s", resp.Manifests, resp.Revision)
		}
		checkDrained(t, node, old)
	})

	// 6. A plugin with a secret: helmfile reading Vault with the token the
	// kubelet projects (make e2e-vault's flow, on the node).
	t.Run("helmfile reads Vault with the token the kubelet projected", func(t *testing.T) {
		checkVaultOnNode(t, node, chart, rel, repoURL, commit)
	})
}

// rollToRevision restarts the repo-server Deployment (with annotations, a
// JSON fragment of extra pod template annotations, if any) until its new pod
// is injected from catalog revision: a chart upgrade reaches the webhook a
// moment after helm returns, and a pod admitted before that is rolled again.
func rollToRevision(t *testing.T, annotations, revision string) *corev1.Pod {
	t.Helper()
	if annotations != "" {
		annotations += ","
	}
	var pod *corev1.Pod
	err := harness.Eventually(90*time.Second, time.Second, func() (bool, error) {
		gen := patchDeployment(t, fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%s"e2e/restartedAt":%q}}}}}`,
			annotations, time.Now().Format(time.RFC3339Nano)), false)
		r, err := env.cp.Client().WaitRollout(chainNS, repoServer, harness.RepoServerSelector, gen, 1, true, 60*time.Second)
		if err != nil {
			return false, err
		}
		pod = &r.Pods[0]
		return status(t, pod).Revision == revision, fmt.Errorf("the injector still serves revision %q", status(t, pod).Revision)
	})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// checkNativeStart reads the order the kubelet kept from the pod's status:
// init containers ran to completion in order, each native sidecar started
// (its postStart hook returned) before the next container started, and nothing
// restarted.
func checkNativeStart(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	var last time.Time
	for i, s := range pod.Status.InitContainerStatuses {
		spec := pod.Spec.InitContainers[i]
		native := spec.RestartPolicy != nil && *spec.RestartPolicy == corev1.ContainerRestartPolicyAlways
		switch {
		case native:
			if s.State.Running == nil || s.Started == nil || !*s.Started {
				t.Errorf("native sidecar %s: not running and started: %s", s.Name, harness.DescribeState(s))
				continue
			}
			if st := s.State.Running.StartedAt.Time; st.Before(last) {
				t.Errorf("native sidecar %s started at %s, before the previous container (%s)", s.Name, st, last)
			}
			last = s.State.Running.StartedAt.Time
		default:
			term := s.State.Terminated
			if term == nil || term.ExitCode != 0 {
				t.Errorf("init container %s did not complete: %s", s.Name, harness.DescribeState(s))
				continue
			}
			if term.StartedAt.Time.Before(last) {
				t.Errorf("init container %s started at %s, before the previous one (%s)", s.Name, term.StartedAt.Time, last)
			}
			last = term.FinishedAt.Time
		}
		if s.RestartCount != 0 {
			t.Errorf("init container %s restarted %d times", s.Name, s.RestartCount)
		}
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Running == nil || !s.Ready || s.RestartCount != 0 {
			t.Errorf("container %s: %s, ready %v, restarts %d", s.Name, harness.DescribeState(s), s.Ready, s.RestartCount)
			continue
		}
		if st := s.State.Running.StartedAt.Time; st.Before(last) {
			t.Errorf("container %s started at %s, before the native sidecars were started (%s)", s.Name, st, last)
		}
	}
	inits, mains := containerNames(pod)
	t.Logf("init containers %v, containers %v: in order, started, ready, no restarts", inits, mains)
}

// checkSidecarsClassic: with nativeSidecars false every plugin sidecar is a
// regular container, running and ready.
func checkSidecarsClassic(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	st := status(t, pod)
	_, mains := containerNames(pod)
	for _, p := range st.Plugins {
		if !strings.Contains(strings.Join(mains, ","), "cmp-"+p) {
			t.Errorf("plugin %s has no regular container: %v", p, mains)
		}
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Running == nil || !s.Ready {
			t.Errorf("container %s: %s, ready %v", s.Name, harness.DescribeState(s), s.Ready)
		}
	}
}

// checkLiveReload is the day-2 path on the real kubelet, with nobody's hand in
// it: the catalog changes a plugin's config (helm upgrade), the injector's
// reconciler (the chart's, with the chart's RBAC) patches the running pod's
// config annotation to the new catalog's, the kubelet re-projects it into the
// sidecar's plugin.yaml, and the sidecar serves it without a restart: Argo CD's
// GetAppDetails announces the parameter only the new config has.
func checkLiveReload(t *testing.T, node *harness.Node, chart *harness.ChartInstall, rs *harness.RepoServer, pod *corev1.Pod, repoURL string) {
	t.Helper()
	c := env.cp.Client()
	const key = "config.cmp-injector.io/params"
	file := node.VolumeFile(pod, "kubernetes.io~downward-api", "cmp-params-config", "plugin.yaml")
	if b, err := os.ReadFile(file); err != nil || string(b) != pod.Annotations[key] {
		t.Fatalf("projected %s: %v\n%s", file, err, b)
	}
	values := filepath.Join(t.TempDir(), "reload.yaml")
	if err := os.WriteFile(values, []byte(`catalog:
  revision: chain-2
  plugins:
    params:
      config:
        inline:
          spec:
            parameters:
              dynamic:
                command: [sh, -c, 'echo "[{\"name\": \"reloaded\", \"title\": \"Reloaded\"}]"']
`), 0o644); err != nil {
		t.Fatal(err)
	}
	upgraded := time.Now()
	if err := chart.Upgrade("-f", values); err != nil {
		t.Fatal(err)
	}
	// The reconciler's patch: the new catalog's rendering and revision.
	var want string
	err := harness.Eventually(90*time.Second, 50*time.Millisecond, func() (bool, error) {
		p, err := c.GetPod(pod.Namespace, pod.Name)
		if err != nil {
			return false, err
		}
		want = p.Annotations[key]
		return status(t, p).Revision == "chain-2" && want != pod.Annotations[key],
			fmt.Errorf("the reconciler has not patched pod %s: revision %q", pod.Name, status(t, p).Revision)
	})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	patched := start.Sub(upgraded)
	if err := harness.Eventually(60*time.Second, 20*time.Millisecond, func() (bool, error) {
		b, err := os.ReadFile(file)
		return err == nil && string(b) == want, fmt.Errorf("plugin.yaml not re-projected yet: %w", err)
	}); err != nil {
		t.Fatal(err)
	}
	projected := time.Since(start)
	var names []string
	err = harness.Eventually(30*time.Second, 100*time.Millisecond, func() (bool, error) {
		var details appDetailsResponse
		if err := rs.Call("appdetails", appDetailsQuery{Repo: &argoRepo{Repo: repoURL}, AppName: "reload", NoCache: true,
			Source: &argoSource{RepoURL: repoURL, Path: "apps/params", TargetRevision: "HEAD", Plugin: &argoPlugin{Name: "params"}}}, &details); err != nil {
			return false, err
		}
		names = names[:0]
		if details.Plugin != nil {
			for _, a := range details.Plugin.ParametersAnnouncement {
				names = append(names, a.Name)
			}
		}
		return strings.Contains(strings.Join(names, ","), "reloaded"), fmt.Errorf("announced %v", names)
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.GetPod(pod.Namespace, pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range p.Status.InitContainerStatuses {
		if s.Name == "cmp-params" && s.RestartCount != 0 {
			t.Errorf("the sidecar restarted %d times; the reload must not need one", s.RestartCount)
		}
	}
	t.Logf("helm upgrade → the reconciler's patch seen %s later (incl. the catalog reload) → the kubelet re-projected plugin.yaml within %s → the sidecar announced %v within %s of the patch being seen, no restart",
		patched.Round(time.Millisecond), projected.Round(time.Millisecond), names, time.Since(start).Round(time.Millisecond))
}

// checkDrained waits for pod (deleted by the rollout) to be gone and reads the
// exit codes the kubelet reported while it stopped the containers: our
// sidecars exit 0 on SIGTERM.
func checkDrained(t *testing.T, node *harness.Node, pod *corev1.Pod) {
	t.Helper()
	c := env.cp.Client()
	exits := map[string]int32{}
	err := harness.Eventually(60*time.Second, 100*time.Millisecond, func() (bool, error) {
		p, err := c.GetPod(pod.Namespace, pod.Name)
		if err != nil {
			return strings.Contains(err.Error(), "404"), err
		}
		for _, s := range harness.AllStatuses(p) {
			if s.State.Terminated != nil {
				exits[s.Name] = s.State.Terminated.ExitCode
			}
		}
		return false, fmt.Errorf("pod %s still exists", pod.Name)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("old pod %s gone; exit codes the kubelet reported: %v", pod.Name, exits)
	seen := 0
	for _, p := range status(t, pod).Plugins {
		if code, ok := exits["cmp-"+p]; ok {
			seen++
			if code != 0 {
				t.Errorf("sidecar cmp-%s exited %d on SIGTERM, want 0 (a drained exit)", p, code)
			}
		}
	}
	// The kubelet may delete the pod before it reports every exit, but a
	// check that saw none would prove nothing.
	if seen == 0 {
		t.Errorf("no sidecar exit was reported before pod %s was gone (saw %v)", pod.Name, exits)
	}
}

// A run that is killed (a CI timeout, ^C twice) cannot clean up: its kubelet,
// containerd and namespace holder die with it, but containerd's shims and the
// containers outlive it by design, holding the node's namespaces, its cgroups
// and the kubelet's kernel tunables. The next run undoes that from the record
// the killed one left in the tool cache.
func TestRealNodeKilledRunIsUndone(t *testing.T) {
	skipUnsupportedSkew(t)
	before, err := harness.SnapshotHost()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	imgs, err := harness.BuildTestImages(ctx, filepath.Join(env.root, "killed-images"), map[harness.ImageKind][]string{
		harness.PauseImage: {harness.SandboxImage},
		harness.ShellImage: {"registry.example/e2e/shell:1"},
	}, harness.ArgoRelease{})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(env.root, "killed")
	child, err := harness.Start("node-child", []string{os.Args[0], "-test.run=^$"}, []string{
		nodeChildEnv + "=" + dir, "E2E_CP_URL=" + env.cp.URL, "E2E_CP_TOKEN=" + env.cp.Token, "E2E_CP_CA=" + env.cp.CAFile,
		"E2E_NODE_IMAGES=" + strings.Join(imgs, ","),
	}, ".", env.logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Stop(time.Second) }()
	if err := harness.Eventually(2*time.Minute, 100*time.Millisecond, func() (bool, error) {
		done, _ := child.Exited()
		return done || strings.Contains(child.Output(), "node-child-ready"), fmt.Errorf("child node not ready")
	}); err != nil {
		t.Fatal(err)
	}
	if done, werr := child.Exited(); done {
		t.Fatalf("the child exited: %v\n%s", werr, child.Output())
	}
	c := env.cp.Client()
	t.Cleanup(func() { _ = c.Delete("/api/v1/nodes/" + harness.NodeName) })
	ns := newNamespace(t, "killed", nil)
	pod := &corev1.Pod{}
	pod.Name = "sleeper"
	pod.Spec.NodeName = harness.NodeName
	grace := int64(1)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	pod.Spec.Containers = []corev1.Container{{Name: "sleep", Image: "registry.example/e2e/shell:1",
		Command: []string{"sleep", "3600"}, ImagePullPolicy: corev1.PullNever}}
	if _, err := c.CreatePod(ns, pod, false); err != nil {
		t.Fatal(err)
	}
	if err := harness.Eventually(60*time.Second, 200*time.Millisecond, func() (bool, error) {
		p, err := c.GetPod(ns, pod.Name)
		if err != nil {
			return false, err
		}
		return p.Status.Phase == corev1.PodRunning, fmt.Errorf("pod phase %s", p.Status.Phase)
	}); err != nil {
		t.Fatal(err)
	}

	// The interruption: SIGKILL, no cleanup.
	if err := child.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait(10 * time.Second)
	left, err := harness.SnapshotHost()
	if err != nil {
		t.Fatal(err)
	}
	shims := shimsOf(dir)
	if len(harness.LeftoverRuns()) == 0 || len(shims) == 0 {
		t.Fatalf("the killed run left no record (%v) or no shim (%v): this test would prove nothing", harness.LeftoverRuns(), shims)
	}
	t.Logf("the killed run left %d shim(s) running and %d host difference(s): %v", len(shims), len(before.Diff(left)), before.Diff(left))

	if err := harness.RestoreLeftovers(); err != nil {
		t.Fatal(err)
	}
	after, err := harness.SnapshotHost()
	if err != nil {
		t.Fatal(err)
	}
	if d := before.Diff(after); len(d) > 0 {
		t.Errorf("after restoring, the host still differs:\n  %s", strings.Join(d, "\n  "))
	}
	if s := shimsOf(dir); len(s) > 0 {
		t.Errorf("shims still running: %v", s)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the killed run's directory is still there: %v", err)
	}
}

// nodeChildEnv names the directory of the child's node.
const nodeChildEnv = "E2E_NODE_CHILD"

// nodeChild starts a node against the parent's control plane, says so and
// waits to be killed.
func nodeChild(dir string) int {
	cp := harness.AttachControlPlane(os.Getenv("E2E_CP_URL"), os.Getenv("E2E_CP_TOKEN"), os.Getenv("E2E_CP_CA"))
	if _, err := harness.StartNode(cp, dir, strings.Split(os.Getenv("E2E_NODE_IMAGES"), ","), os.Stdout); err != nil {
		fmt.Println("node child:", err)
		return 1
	}
	fmt.Println("node-child-ready")
	time.Sleep(10 * time.Minute)
	return 1
}

// shimsOf lists the PIDs of containerd shims serving the node in dir.
func shimsOf(dir string) []string {
	var pids []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), "containerd-shim") && strings.Contains(string(b), dir) {
			pids = append(pids, filepath.Base(filepath.Dir(p)))
		}
	}
	return pids
}
