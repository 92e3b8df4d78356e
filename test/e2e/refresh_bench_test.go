package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// Issue 40's refresh driven by the whole Argo CD: the monorepo's Applications
// (harness.Monorepo, the same as cmd/bench's) stored in the cluster and
// refreshed by Argo CD's own application controller, with its stock fan-out
// (20 status processors), through its repo-server. One stack per row, all up
// at once, the rows taking turns: Argo CD's documented hand-written sidecar
// (argocd-cmp-server, stock repo-server: what users have) and ours as the
// webhook injects it. A round is a hard refresh of every Application, what
// the UI's "Refresh → Hard" asks for each: the refresh annotation, which the
// controller removes once it has compared the Application afresh, so the
// round ends when no Application carries it. Not part of make test (minutes
// on two cores): make bench-e2e runs it. Nothing asserts a time.

const (
	refreshBenchEnv       = "E2E_REFRESH_BENCH"        // 1: run
	refreshBenchSizeEnv   = "E2E_REFRESH_BENCH_SIZE"   // quick (default), 100 or 500
	refreshBenchRoundsEnv = "E2E_REFRESH_BENCH_ROUNDS" // hard refreshes per row, 3 by default
	// E2E_REFRESH_BENCH_ROOT is where the repo-server pods' volumes live:
	// tmpfs by default (harness.MemoryWorkRoot, a memory-backed emptyDir).
	refreshBenchRootEnv = "E2E_REFRESH_BENCH_ROOT"
	// E2E_REFRESH_BENCH_CHUNKS=1024,32760 adds a row of ours per chunk size,
	// set on the repo-server container as an admin would (the injector keeps
	// an explicit value): what the injector's default is chosen against.
	refreshBenchChunksEnv = "E2E_REFRESH_BENCH_CHUNKS"
)

// refreshControllerArgs are the application controller's stock fan-out (its
// defaults, which StartArgoCD's lower figures for small suites override) and
// no periodic resync during the run: every refresh measured is one asked for.
var refreshControllerArgs = []string{"--status-processors", "20", "--operation-processors", "10", "--app-resync", "86400"}

// Argo CD's refresh annotation and its value for a hard refresh (the
// manifests regenerated, nothing from the repo-server's cache).
const (
	argoRefreshAnnotation = "argocd.argoproj.io/refresh"
	argoRefreshHard       = "hard"
)

// refreshRow is one stack: Argo CD's API server and controller around a
// booted repo-server pod.
type refreshRow struct {
	name, what string
	ns, dest   string
	argo       *harness.ArgoCD
	rs         *harness.RepoServer
	pod        *corev1.Pod // the repo-server pod as the apiserver stored it
	sidecar    string      // the plugin server's container
	apps       int
}

// refreshRound is one hard refresh's figures.
type refreshRound struct {
	wallMs                       float64
	repoCPUMs, sideCPUMs, ctrlMs float64
	repoMiB, sideMiB             float64
	failed                       []string // Applications whose comparison failed
}

func TestRefreshBench(t *testing.T) {
	if os.Getenv(refreshBenchEnv) != "1" {
		t.Skipf("%s=1 runs the refresh through the whole Argo CD (make bench-e2e)", refreshBenchEnv)
	}
	sizeName := envOr(refreshBenchSizeEnv, "quick")
	size, ok := harness.RefreshSizes[sizeName]
	if !ok {
		t.Fatalf("%s=%q: want quick, 100 or 500", refreshBenchSizeEnv, sizeName)
	}
	rounds, err := strconv.Atoi(envOr(refreshBenchRoundsEnv, "3"))
	if err != nil || rounds < 1 {
		t.Fatalf("%s=%q: want a count of at least 1", refreshBenchRoundsEnv, os.Getenv(refreshBenchRoundsEnv))
	}
	rel, err := harness.NewestArgoRelease()
	if err != nil {
		t.Fatal(err)
	}
	tree := filepath.Join(t.TempDir(), "mono")
	mb, err := harness.Monorepo(tree, size)
	if err != nil {
		t.Fatal(err)
	}
	repoURL, commit, err := harness.GitRepo(filepath.Join(t.TempDir(), "mono.git"), tree)
	if err != nil {
		t.Fatal(err)
	}

	root, err := os.MkdirTemp(envOr(refreshBenchRootEnv, harness.MemoryWorkRoot()), "cmp-refresh-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })

	var chunks []int
	for _, f := range strings.Split(os.Getenv(refreshBenchChunksEnv), ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			t.Fatalf("%s: %q is no chunk size in bytes", refreshBenchChunksEnv, f)
		}
		chunks = append(chunks, n)
	}
	oursNS := make([]string, 1+len(chunks))
	for i := range oursNS {
		oursNS[i] = newNamespace(t, "refresh-ours", enabledNS)
	}
	startInjector(t, refreshBenchCatalog(t, oursNS...))
	waitActive(t, oursNS[0])
	ours := startRefreshRow(t, rel, root, refreshRowSpec{name: "ours", ns: oursNS[0],
		what: "cmp-server injected by the webhook, the injector's repo-server settings"})
	argo := startRefreshRow(t, rel, root, refreshRowSpec{name: "argo", ns: newNamespace(t, "refresh-argo", nil), handWritten: ours.pod,
		what: "Argo CD's argocd-cmp-server as its docs write the sidecar, stock repo-server"})
	rows := []*refreshRow{argo, ours}
	for i, chunk := range chunks {
		rows = append(rows, startRefreshRow(t, rel, root, refreshRowSpec{name: fmt.Sprintf("ours-%d", chunk), ns: oursNS[i+1], chunk: chunk,
			what: fmt.Sprintf("ours, the repo-server container setting %s=%d itself", keys.EnvCMPChunkSize, chunk)}))
	}

	t.Logf("refresh of %d Applications (%d naming the plugin, %d discovered) on one monorepo of %d files / %.0f MB, Argo CD %s's application controller with %s; the pods' volumes under %s",
		size.Apps, (size.Apps+1)/2, size.Apps/2, size.Files, mb, rel.Version, strings.Join(refreshControllerArgs, " "), root)
	for _, r := range rows {
		start := time.Now()
		r.createApplications(t, repoURL, size.Apps)
		failed := r.waitRefreshed(t, commit, start)
		t.Logf("%s: %d Applications created and compared in %s (the first refresh, a cold repo-server), %d failed%s",
			r.name, size.Apps, time.Since(start).Round(time.Millisecond), len(failed), firstOf(failed))
	}
	runs := make([][]refreshRound, len(rows))
	for round := range rounds {
		for i, r := range rows {
			runs[i] = append(runs[i], r.hardRefresh(t, commit))
			last := runs[i][len(runs[i])-1]
			t.Logf("round %d, %s: %.0f ms, %d Applications failed%s", round+1, r.name, last.wallMs, len(last.failed), firstOf(last.failed))
		}
	}
	t.Log(refreshTable(rows, runs))
}

// refreshBenchCatalog is the example catalog with the refresh's plugin,
// enabled (with helm, which waitActive's probe asks for) in namespaces.
func refreshBenchCatalog(t *testing.T, namespaces ...string) []byte {
	t.Helper()
	enabled := map[string][]string{}
	for _, ns := range namespaces {
		enabled[ns] = []string{"helm", harness.RefreshPluginName}
	}
	var cat, cfg map[string]any
	if err := yaml.Unmarshal(catalogFor(t, true, enabled), &cat); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(harness.RefreshPluginYAML("")), &cfg); err != nil {
		t.Fatal(err)
	}
	cat["plugins"].(map[string]any)[harness.RefreshPluginName] = map[string]any{
		"image": "registry.example/e2e/shell:1", "config": map[string]any{"inline": cfg}}
	b, err := yaml.Marshal(cat)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// refreshRowSpec says what a row runs: ours as the webhook injects it (with
// the repo-server container setting the chunk size itself when chunk is
// set), or, with handWritten (ours' stored pod, for its sidecar's image),
// the chain's repo-server with the plugin's sidecar written by hand as Argo
// CD documents it (argoSidecars).
type refreshRowSpec struct {
	name, what, ns string
	handWritten    *corev1.Pod
	chunk          int
}

// startRefreshRow starts a row's stack in its namespace, its pod's volumes
// under root: Redis, Argo CD's settings, the repo-server pod and Argo CD's
// API server and controller.
func startRefreshRow(t *testing.T, rel harness.ArgoRelease, root string, spec refreshRowSpec) *refreshRow {
	t.Helper()
	c := env.cp.Client()
	name, ns := spec.name, spec.ns
	redis, err := harness.StartRedis(filepath.Join(env.root, "refresh-"+name+"-redis"), redisSecret, env.logFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = redis.Stop() })
	applyArgoConfig(t, ns, redis.Addr)

	pod := repoServerPod(t, "repo-server-refresh-"+name, rel.Image(), harness.RefreshPluginName)
	sidecar := keys.SidecarName(harness.RefreshPluginName)
	chunk := corev1.EnvVar{Name: keys.EnvCMPChunkSize, Value: strconv.Itoa(spec.chunk)}
	if spec.chunk > 0 {
		findContainer(pod, repoServer).Env = append(findContainer(pod, repoServer).Env, chunk)
	}
	if spec.handWritten != nil {
		pod = argoSidecars(benchPod(pod, pod.Name, false, nil), spec.handWritten, []string{harness.RefreshPluginName})
		sidecar = harness.RefreshPluginName
		cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": argoPluginConfigMap(harness.RefreshPluginName)},
			"data":     map[string]string{"plugin.yaml": harness.RefreshPluginYAML("")}}
		if err := c.Apply("/api/v1/namespaces/"+ns+"/configmaps", argoPluginConfigMap(harness.RefreshPluginName), cm); err != nil {
			t.Fatal(err)
		}
	}
	stored := createStored(t, ns, pod)
	if spec.handWritten == nil && stored.Annotations[keys.StatusAnnotation] == "" {
		t.Fatalf("the webhook did not inject %s", stored.Name)
	}
	if spec.chunk > 0 && !slices.Contains(findContainer(stored, repoServer).Env, chunk) {
		t.Fatalf("%s: the injected repo-server does not keep its own %s=%d: %v", name, chunk.Name, spec.chunk, findContainer(stored, repoServer).Env)
	}
	rs, err := harness.BootRepoServer(c, stored, rel, env.bins["cmp-server"], filepath.Join(root, name), env.logFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rs.Stop)
	argo, err := harness.StartArgoCD(c, rel, harness.ArgoServerOptions{
		Namespace: ns, RepoServer: rs.Addr, Redis: redis.Addr, RedisPassword: redisSecret,
		Kubeconfig: env.cp.Kubeconfig, Dir: filepath.Join(env.root, "refresh-"+name+"-argocd"),
		LogLevel: "warn", ControllerArgs: refreshControllerArgs,
	}, env.logFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(argo.Stop)
	return &refreshRow{name: name, what: spec.what, ns: ns, dest: newNamespace(t, "refresh-dest", nil), argo: argo, rs: rs, pod: stored, sidecar: sidecar}
}

// process is the process of the booted pod's container called name.
func (r *refreshRow) process(t *testing.T, name string) *harness.Process {
	t.Helper()
	for _, p := range r.rs.Pod.Processes() {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("%s: the repo-server pod runs no container %s", r.name, name)
	return nil
}

// applicationsPath is the collection of the row's Applications.
func (r *refreshRow) applicationsPath() string {
	return "/apis/argoproj.io/v1alpha1/namespaces/" + r.ns + "/applications"
}

// createApplications stores n Applications of the monorepo in the cluster,
// as `kubectl apply` of an app-of-apps would, each asking for a hard refresh:
// even ones name the plugin, odd ones leave it to discovery (plugin: {}).
func (r *refreshRow) createApplications(t *testing.T, repoURL string, n int) {
	t.Helper()
	c := env.cp.Client()
	parallel(t, n, func(i int) error {
		plugin := map[string]any{}
		if i%2 == 0 {
			plugin["name"] = harness.RefreshPluginName
		}
		name := filepath.Base(harness.RefreshApp(i))
		app := map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
			// Hard from the first: the controller reports a failed
			// comparison of a hard refresh; one of a normal refresh it
			// drops within its grace period without a status, and the
			// next try would wait for a resync, which this bench turns off.
			"metadata": map[string]any{"name": name, "annotations": map[string]string{argoRefreshAnnotation: argoRefreshHard}},
			"spec": map[string]any{"project": "default",
				"source":      map[string]any{"repoURL": repoURL, "path": harness.RefreshApp(i), "targetRevision": "HEAD", "plugin": plugin},
				"destination": map[string]any{"server": inCluster, "namespace": r.dest}}}
		return c.Apply(r.applicationsPath(), name, app)
	})
	r.apps = n
}

// parallel runs f(0..n-1) on 8 goroutines and fails t with the first error.
func parallel(t *testing.T, n int, f func(i int) error) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d failed, the first: %v", len(errs), n, errs[0])
	}
}

// refreshApps is the part of the Applications a round reads.
type refreshApps struct {
	Items []struct {
		Metadata struct {
			Name        string            `json:"name"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Status struct {
			ReconciledAt string `json:"reconciledAt"`
			Sync         struct {
				Revision string `json:"revision"`
			} `json:"sync"`
			Conditions []struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"conditions"`
		} `json:"status"`
	} `json:"items"`
}

// waitRefreshed waits until the controller has compared every Application of
// the row since start and removed its refresh annotation, and returns those
// whose comparison failed (name: the condition's message). A failed one
// counts as done: the controller gave its answer, an error, which users see
// too (a repo-server call over the controller's 60 s timeout is one). A
// succeeded one must be at commit.
func (r *refreshRow) waitRefreshed(t *testing.T, commit string, start time.Time) (failed []string) {
	t.Helper()
	since := start.Truncate(time.Second) // reconciledAt has whole seconds
	err := harness.Eventually(3*time.Hour, 250*time.Millisecond, func() (bool, error) {
		if err := r.argo.Exited(); err != nil {
			return false, harness.Final(err)
		}
		var list refreshApps
		if err := env.cp.Client().Get(r.applicationsPath(), &list); err != nil {
			return false, err
		}
		if len(list.Items) != r.apps {
			return false, fmt.Errorf("%d Applications listed, want %d", len(list.Items), r.apps)
		}
		pending := 0
		failed = failed[:0]
		for _, app := range list.Items {
			at, _ := time.Parse(time.RFC3339, app.Status.ReconciledAt)
			if _, asked := app.Metadata.Annotations[argoRefreshAnnotation]; asked || at.Before(since) {
				pending++
				continue
			}
			failure := ""
			for _, c := range app.Status.Conditions {
				if strings.HasSuffix(c.Type, "Error") {
					failure = app.Metadata.Name + ": " + c.Type + ": " + c.Message
				}
			}
			switch {
			case failure != "":
				failed = append(failed, failure)
			case app.Status.Sync.Revision != commit:
				pending++
			}
		}
		return pending == 0, fmt.Errorf("%s: %d of %d Applications not refreshed at %s", r.name, pending, r.apps, commit)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) == r.apps {
		t.Fatalf("%s: every Application failed, the first: %s", r.name, failed[0])
	}
	return failed
}

// hardRefresh asks a hard refresh of every Application and measures until
// the controller has done them all: the wall time, the CPU the repo-server,
// the plugin server (with its commands) and the controller spent, and the
// peak RSS of the repo-server and the plugin server over the round.
func (r *refreshRow) hardRefresh(t *testing.T, commit string) refreshRound {
	t.Helper()
	repo, side := r.process(t, repoServer), r.process(t, r.sidecar)
	pids := []int{repo.PID(), side.PID(), r.argo.ControllerPID()}
	cpu0 := make([]float64, len(pids))
	for i, pid := range pids {
		v, err := servingtest.CPUMs(pid)
		if err != nil {
			t.Fatal(err)
		}
		cpu0[i] = v
		if i < 2 {
			if err := servingtest.ResetPeakRSS(pid); err != nil {
				t.Fatal(err)
			}
		}
	}
	c := env.cp.Client()
	start := time.Now()
	patch := mustJSON(map[string]any{"metadata": map[string]any{"annotations": map[string]string{argoRefreshAnnotation: argoRefreshHard}}})
	parallel(t, r.apps, func(i int) error {
		return c.MergePatch(r.applicationsPath()+"/"+filepath.Base(harness.RefreshApp(i)), patch)
	})
	failed := r.waitRefreshed(t, commit, start)
	wall := time.Since(start)
	var cpu [3]float64
	for i, pid := range pids {
		v, err := servingtest.CPUMs(pid)
		if err != nil {
			t.Fatal(err)
		}
		cpu[i] = v - cpu0[i]
	}
	return refreshRound{wallMs: ms(wall), repoCPUMs: cpu[0], sideCPUMs: cpu[1], ctrlMs: cpu[2],
		repoMiB: servingtest.PeakRSSMiB(pids[0]), sideMiB: servingtest.PeakRSSMiB(pids[1]), failed: failed}
}

// refreshTable is the rows' medians side by side, each a ratio of the first
// row's (Argo CD's), and issue 40's goals for the refresh as pass lines.
func refreshTable(rows []*refreshRow, runs [][]refreshRound) string {
	med := func(rs []refreshRound, f func(refreshRound) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		return median(v)
	}
	// A column with a goal (issue 40's, ours over Argo CD's) gets a pass
	// line per row of ours.
	cols := []struct {
		name string
		f    func(refreshRound) float64
		goal float64
		what string // the goal's words
	}{
		{"wall ms", func(r refreshRound) float64 { return r.wallMs }, harness.RefreshGoalWall, "wall"},
		{"repo-server CPU ms", func(r refreshRound) float64 { return r.repoCPUMs }, 0, ""},
		{"sidecar CPU ms", func(r refreshRound) float64 { return r.sideCPUMs }, harness.RefreshGoalSidecarCPU, "sidecar CPU"},
		{"controller CPU ms", func(r refreshRound) float64 { return r.ctrlMs }, 0, ""},
		{"repo-server MiB", func(r refreshRound) float64 { return r.repoMiB }, 0, ""},
		{"sidecar MiB", func(r refreshRound) float64 { return r.sideMiB }, harness.RefreshGoalSidecarRSS, "sidecar peak memory"},
	}
	var b strings.Builder
	fmt.Fprintf(&b, "hard refresh through the application controller, medians of %d rounds:\n  %-10s", len(runs[0]), "row")
	for _, c := range cols {
		fmt.Fprintf(&b, " %19s %6s", c.name, "× argo")
	}
	b.WriteString("   wall min-max   failed (all rounds)\n")
	anchor := make([]float64, len(cols))
	for i, c := range cols {
		anchor[i] = med(runs[0], c.f)
	}
	ratios := make([][]float64, len(rows))
	for i, r := range rows {
		fmt.Fprintf(&b, "  %-10s", r.name)
		for j, c := range cols {
			v := med(runs[i], c.f)
			ratio := v / anchor[j]
			ratios[i] = append(ratios[i], ratio)
			fmt.Fprintf(&b, " %19.1f %6.2f", v, ratio)
		}
		walls := make([]float64, len(runs[i]))
		for k, x := range runs[i] {
			walls[k] = x.wallMs
		}
		failed := 0
		for _, x := range runs[i] {
			failed += len(x.failed)
		}
		fmt.Fprintf(&b, "   %.0f-%.0f   %d\n", slices.Min(walls), slices.Max(walls), failed)
	}
	for _, r := range rows {
		fmt.Fprintf(&b, "  %-10s %s\n", r.name, r.what)
	}
	b.WriteString("  (CPU: each process's own and its waited-for children's over the round; MiB: peak RSS (VmHWM) over the round)\n")
	for i, r := range rows[1:] {
		for j, c := range cols {
			if c.goal == 0 {
				continue
			}
			verdict := "PASS"
			if ratios[i+1][j] > c.goal {
				verdict = "MISS"
			}
			fmt.Fprintf(&b, "  %s issue 40, %s, hard refresh of %d Applications through the controller: %s %.2f× Argo CD's (goal ≤ %.1f×)\n",
				verdict, r.name, r.apps, c.what, ratios[i+1][j], c.goal)
		}
	}
	return b.String()
}

// firstOf is ", the first: " and failed's first entry, or nothing.
func firstOf(failed []string) string {
	if len(failed) == 0 {
		return ""
	}
	return ", the first: " + failed[0]
}

// envOr is the environment variable name, or def when it is unset or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
