package e2e

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// The three parts of the node bench (node_bench_test.go), each measuring and
// then printing its table.

// startConfig is one pod shape of part 1.
type startConfig struct {
	name string
	pod  func(name string) *corev1.Pod
}

// startSample is one pod's start, in ms from the create request.
type startSample struct {
	started           map[string]float64 // each running container's first process
	ready             float64            // first seen Ready (50 ms polls)
	kubeletRepoServer int64              // the kubelet's startedAt − creationTimestamp, whole s
	kubeletReady      int64              // the Ready condition's transition − creationTimestamp, whole s
}

// libraryStart is the pod-start configuration of issue 40's goal: four
// library plugins over none, at most libraryStartGoalMs more.
const (
	libraryStart       = "injected, 4 library plugins"
	libraryStartGoalMs = 4000
)

// selectStarts keeps the configurations nodeBenchStartEnv matches, and the
// first.
func selectStarts(t *testing.T, configs []startConfig) []startConfig {
	t.Helper()
	expr := os.Getenv(nodeBenchStartEnv)
	if expr == "" {
		return configs
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		t.Fatalf("%s=%q: %v", nodeBenchStartEnv, expr, err)
	}
	out := configs[:1:1]
	for _, c := range configs[1:] {
		if re.MatchString(c.name) {
			out = append(out, c)
		}
	}
	return out
}

// podStart creates pods of every configuration in turn (so the machine's
// drift spreads over all of them), one pod on the node at a time.
func (b *nodeBench) podStart(configs []startConfig, pods int) {
	samples := make([][]startSample, len(configs))
	for i := 0; i < pods; i++ {
		for j, cfg := range configs {
			samples[j] = append(samples[j], b.startOnce(cfg, fmt.Sprintf("bench-start-%d-%d", j, i)))
		}
	}
	printPodStart(configs, samples)
}

func (b *nodeBench) startOnce(cfg startConfig, name string) startSample {
	b.t.Helper()
	pod := cfg.pod(name)
	t0 := time.Now()
	if _, err := env.cp.Client().CreatePod(chainNS, pod, false); err != nil {
		b.t.Fatal(err)
	}
	ready, readyAt := b.waitReady(name)
	starts, err := b.node.ProcessStarts(ready)
	if err != nil {
		b.t.Fatal(err)
	}
	s := startSample{started: map[string]float64{}, ready: ms(readyAt.Sub(t0))}
	for n, at := range starts {
		s.started[n] = ms(at.Sub(t0))
	}
	created := ready.CreationTimestamp.Time
	for _, st := range ready.Status.ContainerStatuses {
		if st.Name == repoServerName && st.State.Running != nil {
			s.kubeletRepoServer = int64(st.State.Running.StartedAt.Sub(created).Seconds())
		}
	}
	for _, cond := range ready.Status.Conditions {
		if cond.Type == corev1.PodReady {
			s.kubeletReady = int64(cond.LastTransitionTime.Sub(created).Seconds())
		}
	}
	if _, ok := s.started[repoServerName]; !ok {
		b.t.Fatalf("pod %s: no process of %s", name, repoServerName)
	}
	b.remove(ready)
	return s
}

func printPodStart(configs []startConfig, samples [][]startSample) {
	fmt.Printf("\n-- Pod start: ms from the pod's create request (median of %d pods, one pod on the node at a time)\n", len(samples[0]))
	fmt.Println("   started: the container's first process (/proc, 10 ms ticks); Ready: first seen Ready (50 ms polls;")
	fmt.Println("   Argo CD's repo-server readinessProbe has initialDelaySeconds 5, period 10). kubelet: its own status")
	fmt.Println("   timestamps, which the API keeps in whole seconds (startedAt and Ready − creationTimestamp).")
	fmt.Printf("   %-30s %12s %12s %9s %18s\n", "pods", "repo-server", "+ vs none", "Ready", "kubelet: rs, Ready")
	var none float64
	goal := ""
	for j, cfg := range configs {
		rs := median(pick(samples[j], func(s startSample) float64 { return s.started[repoServerName] }))
		if j == 0 {
			none = rs
		}
		if cfg.name == libraryStart {
			verdict := "met"
			if rs-none > libraryStartGoalMs {
				verdict = "missed"
			}
			goal = fmt.Sprintf("   goal (issue 40): %s start the repo-server at most %s ms after none: %s ms, %s\n",
				cfg.name, msText(libraryStartGoalMs), signedMs(rs-none), verdict)
		}
		fmt.Printf("   %-30s %12s %12s %9s %13d s, %d s\n", cfg.name, msText(rs), signedMs(rs-none),
			msText(median(pick(samples[j], func(s startSample) float64 { return s.ready }))),
			medianInt(pick(samples[j], func(s startSample) float64 { return float64(s.kubeletRepoServer) })),
			medianInt(pick(samples[j], func(s startSample) float64 { return float64(s.kubeletReady) })))
	}
	fmt.Print(goal)
	fmt.Println("   each container started, in start order (median ms; min-max):")
	for j, cfg := range configs {
		names := []string{}
		for n := range samples[j][0].started {
			names = append(names, n)
		}
		med := map[string]float64{}
		for _, n := range names {
			med[n] = median(pick(samples[j], func(s startSample) float64 { return s.started[n] }))
		}
		sort.Slice(names, func(a, c int) bool { return med[names[a]] < med[names[c]] })
		parts := make([]string, 0, len(names))
		for _, n := range names {
			v := pick(samples[j], func(s startSample) float64 { return s.started[n] })
			parts = append(parts, fmt.Sprintf("%s %s (%s-%s)", n, msText(med[n]), msText(slices.Min(v)), msText(slices.Max(v))))
		}
		fmt.Printf("   %-30s %s\n", cfg.name+":", strings.Join(parts, ", "))
	}
	fmt.Println("   steps between consecutive container starts, each pod's own (median ms; min-max):")
	for j, cfg := range configs {
		fmt.Printf("   %-30s %s\n", cfg.name+":", startSteps(samples[j]))
	}
}

// startSteps is the time between one container's start and the next's, in
// start order, within each pod, as median (min-max) per step: the kubelet's
// rhythm without the drift of the sandbox's own start.
func startSteps(samples []startSample) string {
	var steps [][]float64
	for _, s := range samples {
		at := make([]float64, 0, len(s.started))
		for _, v := range s.started {
			at = append(at, v)
		}
		sort.Float64s(at)
		for i := 1; i < len(at); i++ {
			if len(steps) < i {
				steps = append(steps, nil)
			}
			steps[i-1] = append(steps[i-1], at[i]-at[i-1])
		}
	}
	if len(steps) == 0 {
		return "-"
	}
	parts := make([]string, len(steps))
	for i, v := range steps {
		parts[i] = fmt.Sprintf("%s (%s-%s)", msText(median(v)), msText(slices.Min(v)), msText(slices.Max(v)))
	}
	return strings.Join(parts, ", ")
}

// tmpMedia sends one warm-up and then runs GenerateManifest requests per
// repository to each pod's repo-server in turn, for the pod's plugin (the
// pods differ only in the plugin's /tmp medium), and prints the wall times
// and our server's own request durations (its "request done" log line).
func (b *nodeBench) tmpMedia(pods []*corev1.Pod, plugins []string, repos []benchRepoRef, runs int) {
	b.t.Helper()
	type cell struct{ wall, server, own []float64 }
	cells := make([][]cell, len(pods))
	rss := make([]*harness.RepoServer, len(pods))
	for i, p := range pods {
		rss[i], cells[i] = b.repoServer(p), make([]cell, len(repos))
	}
	for ri, repo := range repos {
		seen := make([]int, len(pods))
		for i := range pods {
			// The warm-up: the repo-server clones the repository.
			if _, err := b.generate(rss[i], repo, plugins[i]); err != nil {
				b.t.Fatalf("pod %s, %d files: %v", pods[i].Name, repo.files, err)
			}
			total, _ := requestDurations(b.node.ContainerLogs(pods[i])[keys.SidecarName(plugins[i])])
			seen[i] = len(total)
		}
		for r := 0; r < runs; r++ {
			for i := range pods {
				took, err := b.generate(rss[i], repo, plugins[i])
				if err != nil {
					b.t.Fatalf("pod %s, %d files: %v", pods[i].Name, repo.files, err)
				}
				cells[i][ri].wall = append(cells[i][ri].wall, ms(took))
			}
		}
		for i := range pods {
			total, own := requestDurations(b.node.ContainerLogs(pods[i])[keys.SidecarName(plugins[i])])
			cells[i][ri].server, cells[i][ri].own = total[seen[i]:], own[seen[i]:]
		}
	}
	fmt.Printf("\n-- GenerateManifest through Argo CD's repo-server, plugins %s injected, the same but for the /tmp medium\n", strings.Join(plugins, " and "))
	fmt.Printf("   (median of %d requests after a warm-up; wall: repoclient's call from the node's network; server: our\n", runs)
	fmt.Println("   sidecar's \"request done\" duration, from the stream's opening, so it includes the repo-server's packing,")
	fmt.Println("   the same on both media; own: its after_header, from the header the repo-server sends once it has packed;")
	fmt.Println("   peak: the sidecar's cgroup after all requests)")
	fmt.Printf("   %-40s", "plugin: /tmp")
	for _, repo := range repos {
		fmt.Printf(" %10s %10s %10s", fmt.Sprintf("%d wall", repo.files), "server", "own")
	}
	fmt.Printf(" %10s\n", "peak MiB")
	for i, p := range pods {
		fmt.Printf("   %-40s", plugins[i]+": "+tmpMedium(p, plugins[i]))
		for ri := range repos {
			fmt.Printf(" %10s %10s %10s", msText(median(cells[i][ri].wall)), msText(median(cells[i][ri].server)), msText(median(cells[i][ri].own)))
		}
		mem, err := b.node.ContainerMemory(p)
		if err != nil {
			b.t.Fatal(err)
		}
		fmt.Printf(" %10.1f\n", mib(mem[keys.SidecarName(plugins[i])].Peak))
	}
	for ri, repo := range repos {
		if len(pods) == 2 {
			fmt.Printf("   %d files: memory − disk: wall %+.0f ms, server %+.0f ms, own %+.0f ms; memory ÷ disk, own: %.2f (issue 28 item 3: ≤ 0.50 at 5,000 files)\n", repo.files,
				median(cells[1][ri].wall)-median(cells[0][ri].wall), median(cells[1][ri].server)-median(cells[0][ri].server),
				median(cells[1][ri].own)-median(cells[0][ri].own), median(cells[1][ri].own)/median(cells[0][ri].own))
		}
	}
}

// requestDone finds a GenerateManifest's durations (seconds, zap's
// encoding) in our server's "request done" log line, JSON or console: from
// the stream's opening, and from its header on. Argo CD's repo-server also
// streams the repository for MatchRepository before a named plugin's
// GenerateManifest: those lines are not counted.
var requestDone = regexp.MustCompile(`request done.*"rpc":"GenerateManifest".*"duration":\s*([0-9.eE+-]+).*"after_header":\s*([0-9.eE+-]+)`)

// requestDurations are the durations of every GenerateManifest "request
// done" line of a container's log, in ms, oldest first: the whole request's
// and the part after the header.
func requestDurations(log string) (total, afterHeader []float64) {
	for _, line := range strings.Split(log, "\n") {
		m := requestDone.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s, err1 := strconv.ParseFloat(m[1], 64)
		h, err2 := strconv.ParseFloat(m[2], 64)
		if err1 == nil && err2 == nil {
			total, afterHeader = append(total, s*1000), append(afterHeader, h*1000)
		}
	}
	return total, afterHeader
}

// settleAfterRequests is how long after the last request the memory is read
// again: longer than our server's --return-memory-after default.
const settleAfterRequests = 5 * time.Second

// memory reads every container's cgroup in both 4-plugin pods once they have
// idled, sends benchRequests GenerateManifest requests per plugin to each
// (in turn) and reads them again.
func (b *nodeBench) memory(ours, argo *corev1.Pod, repo benchRepoRef) {
	b.t.Helper()
	pods := []*corev1.Pod{ours, argo}
	read := func() []map[string]harness.CgroupMemory {
		out := make([]map[string]harness.CgroupMemory, len(pods))
		for i, p := range pods {
			m, err := b.node.ContainerMemory(p)
			if err != nil {
				b.t.Fatal(err)
			}
			out[i] = m
		}
		return out
	}
	time.Sleep(10 * time.Second)
	idle := read()
	rss := []*harness.RepoServer{b.repoServer(ours), b.repoServer(argo)}
	for i := 0; i < benchRequests; i++ {
		for _, plugin := range benchPlugins {
			for k, p := range pods {
				_, err := b.generate(rss[k], repo, plugin)
				// The broken plugin fails by design: its request still
				// sends and unpacks the repository.
				if (err != nil) != (plugin == "broken") {
					b.t.Errorf("pod %s, plugin %s: %v", p.Name, plugin, err)
				}
			}
		}
	}
	after := read()
	// Our server returns its free heap once idle for a second
	// (--return-memory-after); Argo CD's leaves it to the Go runtime. Both
	// are read again a few seconds later, when any sidecar would be idle.
	time.Sleep(settleAfterRequests)
	settled := read()
	v := idle[0][sidecarName(ours, benchPlugins[0])].Version
	fmt.Printf("\n-- Memory of the 4-plugin pod from each container's cgroup (cgroup v%d), MiB: idle (10 s after Ready),\n", v)
	fmt.Printf("   right after %d GenerateManifest requests per plugin (%d files) and %s later; injected vs Argo CD's hand-written sidecars\n",
		benchRequests, repo.files, settleAfterRequests)
	if v == 1 {
		fmt.Println("   usage = memory.usage_in_bytes (v2 memory.current), peak = memory.max_usage_in_bytes (v2 memory.peak),")
	} else {
		fmt.Println("   usage = memory.current, peak = memory.peak,")
	}
	fmt.Println("   anon = memory.stat's rss (v2 anon): the processes' own memory, without the page cache of /tmp's files")
	fmt.Printf("   %-20s %-9s %8s %8s %8s | %8s %8s %8s | %8s %8s\n", "container", "pod", "usage", "peak", "anon", "usage", "peak", "anon", "usage", "anon")
	var sums [2][3]harness.CgroupMemory // [pod][idle, after, settled]
	row := func(name, pod string, i, a, l harness.CgroupMemory) {
		fmt.Printf("   %-20s %-9s %8.1f %8.1f %8.1f | %8.1f %8.1f %8.1f | %8.1f %8.1f\n", name, pod,
			mib(i.Usage), mib(i.Peak), mib(i.Anon), mib(a.Usage), mib(a.Peak), mib(a.Anon), mib(l.Usage), mib(l.Anon))
	}
	add := func(s *harness.CgroupMemory, m harness.CgroupMemory) {
		s.Usage, s.Peak, s.Anon = s.Usage+m.Usage, s.Peak+m.Peak, s.Anon+m.Anon
	}
	for _, plugin := range benchPlugins {
		for k, p := range pods {
			n := sidecarName(p, plugin)
			row(n, []string{"injected", "Argo CD"}[k], idle[k][n], after[k][n], settled[k][n])
			add(&sums[k][0], idle[k][n])
			add(&sums[k][1], after[k][n])
			add(&sums[k][2], settled[k][n])
		}
	}
	row("4 sidecars", "injected", sums[0][0], sums[0][1], sums[0][2])
	row("4 sidecars", "Argo CD", sums[1][0], sums[1][1], sums[1][2])
	ratio := func(a, b int64) float64 { return float64(a) / float64(b) }
	fmt.Printf("   %-20s %-9s %8.2f %8.2f %8.2f | %8.2f %8.2f %8.2f | %8.2f %8.2f   (issue 28 item 5: ≤ 0.40)\n", "ratio", "inj/Argo",
		ratio(sums[0][0].Usage, sums[1][0].Usage), ratio(sums[0][0].Peak, sums[1][0].Peak), ratio(sums[0][0].Anon, sums[1][0].Anon),
		ratio(sums[0][1].Usage, sums[1][1].Usage), ratio(sums[0][1].Peak, sums[1][1].Peak), ratio(sums[0][1].Anon, sums[1][1].Anon),
		ratio(sums[0][2].Usage, sums[1][2].Usage), ratio(sums[0][2].Anon, sums[1][2].Anon))
	for k := range pods {
		row(repoServerName, []string{"injected", "Argo CD"}[k], idle[k][repoServerName], after[k][repoServerName], settled[k][repoServerName])
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func pick(samples []startSample, f func(startSample) float64) []float64 {
	out := make([]float64, len(samples))
	for i, s := range samples {
		out[i] = f(s)
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func medianInt(v []float64) int64 { return int64(median(v)) }

// signedMs is a millisecond difference with its sign.
func signedMs(v float64) string {
	if v < 0 {
		return msText(v)
	}
	return "+" + msText(v)
}

// msText is a millisecond figure with a thousands separator.
func msText(v float64) string {
	neg := v < 0
	n := int64(v + 0.5)
	if neg {
		n = int64(-v + 0.5)
	}
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}

// TestRequestDurationsParse: the bench reads both durations of our server's
// GenerateManifest lines, and only those (runs without a node).
func TestRequestDurationsParse(t *testing.T) {
	log := `{"level":"info","msg":"request done","request_id":"a","rpc":"MatchRepository","config_hash":"h","duration":0.9,"after_header":0.4}
{"level":"info","msg":"request done","request_id":"b","rpc":"GenerateManifest","config_hash":"h","deadline_in":59.9,"app_rel_path":".","duration":1.5,"after_header":0.25}
{"level":"warn","msg":"request failed","request_id":"c","rpc":"GenerateManifest","duration":2,"after_header":1}`
	total, own := requestDurations(log)
	if len(total) != 1 || total[0] != 1500 || len(own) != 1 || own[0] != 250 {
		t.Fatalf("durations %v, after_header %v; want [1500] and [250]", total, own)
	}
}
