package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
)

// benchPlugin is the plugin both servers run: it prints one object, so the
// figures are the servers' (receive, unpack, exec, respond), not a tool's.
const benchPlugin = `apiVersion: argoproj.io/v1alpha1
kind: ConfigManagementPlugin
metadata:
  name: %s
spec:%s
  generate:
    command: [sh, -c, 'printf "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"bench\"}}"']
`

// scenario is one repo-server configuration: its environment, and the
// exclusions and chunk size that environment sets, to pack the tarball the
// unpack floors take and to say how it is sent.
type scenario struct {
	name    string
	env     []string
	exclude []string
	chunk   int
}

func scenarios(o options) []scenario {
	return []scenario{
		{name: "stock", chunk: 1024},
		{name: "tuned", env: []string{"ARGOCD_CMP_CHUNK_SIZE=" + strconv.Itoa(o.chunk), "ARGOCD_REPO_SERVER_PLUGIN_TAR_EXCLUSIONS=" + o.exclude},
			exclude: strings.Split(o.exclude, ";"), chunk: o.chunk},
	}
}

// server is one plugin server under test.
type server struct {
	name string
	argv []string
	env  []string
	// readOnly declares spec.readOnlyRepository (our server then shares one
	// tree per repository stream); only for the monorepo.
	readOnly bool
}

func cmpServers(o options) []server {
	var out []server
	if o.argo != "" {
		out = append(out, server{name: "argo", argv: []string{o.argo, "--config-dir-path", "CONFIG"},
			env: []string{"ARGOCD_BINARY_NAME=argocd-cmp-server"}})
	}
	for _, b := range o.servers {
		out = append(out, server{name: b.name, argv: []string{b.path, "serve", "--config-dir-path", "CONFIG"}})
	}
	return out
}

// readOnlyServers are ours again with spec.readOnlyRepository, for the monorepo.
func readOnlyServers(o options) []server {
	var out []server
	for _, b := range o.servers {
		out = append(out, server{name: b.name + "-ro", argv: []string{b.path, "serve", "--config-dir-path", "CONFIG"}, readOnly: true})
	}
	return out
}

// result is one server × scenario × repository measurement.
type result struct {
	server, scenario string
	medianMs, minMs  float64
	totalMs          float64
	// packMs is the median time the client took to pack the repository
	// (before the server receives anything); afterMs the median of the rest.
	packMs, afterMs float64
	cpuMsPerReq     float64
	rssMiB          float64
	// floor marks an unpack floor: no client and no RSS of its own (see
	// unpackFloor.run), so only afterMs (its wall time), minMs and CPU.
	floor bool
}

func runCMP(o options) error {
	if !exists(o.cmpbench) {
		return fmt.Errorf("%s is missing: run `hack/tools.sh cmpbench` (Argo CD's repo-server code as a driver)", o.cmpbench)
	}
	base, err := os.MkdirTemp(o.workRoot, "cmp-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(base)
	type repo struct {
		name, root string
		apps       []string
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var repos []repo
	for _, n := range o.sizes {
		root := filepath.Join(base, "repos", fmt.Sprintf("r%d", n))
		mb, err := genRepo(root, n, 0)
		if err != nil {
			return err
		}
		repos = append(repos, repo{fmt.Sprintf("%d files / %.0f MB", n, mb), root, []string{"."}})
	}
	if o.monorepo {
		root := filepath.Join(base, "repos", "mono")
		mb, err := genRepo(root, 1000, 20)
		if err != nil {
			return err
		}
		var apps []string
		for i := range 20 {
			apps = append(apps, fmt.Sprintf("apps/app-%02d", i))
		}
		repos = append(repos, repo{fmt.Sprintf("monorepo 20 apps, 1000 files / %.0f MB", mb), root, apps})
	}
	fmt.Printf("\n== plugin servers through Argo CD's repo-server code (GenerateManifests), %d interleaved rounds after a warm-up; tuned: ARGOCD_CMP_CHUNK_SIZE=%d ARGOCD_REPO_SERVER_PLUGIN_TAR_EXCLUSIONS=%q\n",
		o.runs, o.chunk, o.exclude)
	if o.argo == "" {
		fmt.Println("   (Argo CD's argocd-cmp-server is not cached: run hack/tools.sh argocd to compare with it)")
	}
	for _, r := range repos {
		var results []result
		var sent []string
		for _, sc := range scenarios(o) {
			rs, how, err := measureScenario(o, base, self, sc, r.root, r.apps)
			if err != nil {
				return fmt.Errorf("%s %s: %w", r.name, sc.name, err)
			}
			results, sent = append(results, rs...), append(sent, how)
		}
		printCMP(r.name+"; "+strings.Join(sent, ", "), len(r.apps) > 1, results)
		o.goals.fromCMP(o, r.name, len(r.apps) > 1, results)
	}
	return nil
}

// measureScenario measures every server, and for a single-app repository the
// unpack floors, with one repo-server configuration. It also says how that
// configuration sends the repository: the tarball as the repo-server's client
// packs it (cmpserver/client packs the same way), its size and messages.
func measureScenario(o options, base, self string, sc scenario, root string, apps []string) ([]result, string, error) {
	tgz, err := client.WriteTarball(root, base, sc.exclude)
	if err != nil {
		return nil, "", err
	}
	defer func() { _ = tgz.Remove() }()
	servers := cmpServers(o)
	var floors []unpackFloor
	if len(apps) > 1 {
		servers = append(servers, readOnlyServers(o)...)
	} else {
		floors = unpackFloors(self)
	}
	rs, err := measureCMP(o, base, servers, floors, tgz.Path, sc, root, apps)
	how := fmt.Sprintf("%s: tarball %.1f MB in %d messages of %d KiB", sc.name, float64(tgz.Size)/1e6, (tgz.Size+int64(sc.chunk)-1)/int64(sc.chunk), sc.chunk>>10)
	return rs, how, err
}

func printCMP(repo string, mono bool, rs []result) {
	var anchor *result
	for i := range rs {
		if rs[i].server == "argo" && rs[i].scenario == "stock" {
			anchor = &rs[i]
		}
	}
	fmt.Printf("\n%s\n", repo)
	timeCol := "median ms"
	if mono {
		timeCol = "total ms (20 apps)"
	}
	fmt.Printf("  %-10s %-6s %18s %9s %8s %14s %8s %8s %8s", "server", "repo-s", timeCol, "min ms", "× argo", "CPU ms/req", "× argo", "RSS MiB", "× argo")
	if !mono {
		fmt.Printf(" %9s %9s %8s", "pack ms", "rest ms", "× argo")
	}
	fmt.Println()
	for _, r := range rs {
		t := r.medianMs
		if mono {
			t = r.totalMs
		}
		rt, rc, rr := "-", "-", "-"
		if anchor != nil {
			at := anchor.medianMs
			if mono {
				at = anchor.totalMs
			}
			rt = fmt.Sprintf("%.2f", t/at)
			if anchor.cpuMsPerReq > 0 {
				rc = fmt.Sprintf("%.2f", r.cpuMsPerReq/anchor.cpuMsPerReq)
			}
			rr = fmt.Sprintf("%.2f", r.rssMiB/anchor.rssMiB)
		}
		ts, rss, ps := fmt.Sprintf("%.0f", t), fmt.Sprintf("%.0f", r.rssMiB), fmt.Sprintf("%.0f", r.packMs)
		if r.floor {
			// An unpack floor has no client time, packing or RSS of its own.
			ts, rt, rss, rr, ps = "-", "-", "-", "-", "-"
		}
		fmt.Printf("  %-10s %-6s %18s %9.0f %8s %14.0f %8s %8s %8s", r.server, r.scenario, ts, r.minMs, rt, r.cpuMsPerReq, rc, rss, rr)
		if !mono {
			ra := "-"
			if anchor != nil && anchor.afterMs > 0 {
				ra = fmt.Sprintf("%.2f", r.afterMs/anchor.afterMs)
			}
			fmt.Printf(" %9s %9.0f %8s", ps, r.afterMs, ra)
		}
		fmt.Println()
	}
	if !mono {
		fmt.Println("  (pack ms: Argo CD's client writing the .tar.gz before it sends anything, the same for every server;")
		fmt.Println("   rest ms: from then to the response, the part a plugin server's speed changes)")
		if slices.ContainsFunc(rs, func(r result) bool { return r.floor }) {
			fmt.Println(unpackFloorNote)
		}
	}
}

// measureCMP starts a fresh instance of every server (so each peak RSS is this
// scenario's), sends each one warm-up request, then o.runs rounds in which the
// servers take turns, one request (one per app) each. Taking turns keeps the
// VM's drift over minutes out of the ratios. CPU is each server's own and its
// waited-for children's (the plugin commands) across the rounds; a server
// waiting for its turn uses none.
func measureCMP(o options, base string, servers []server, floors []unpackFloor, tarball string, sc scenario, repoRoot string, apps []string) ([]result, error) {
	var running []*cmpServer
	defer func() {
		for _, r := range running {
			r.stop()
		}
	}()
	for _, s := range servers {
		r, err := startCMP(base, s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		running = append(running, r)
		if _, _, err := r.drive(o, sc, repoRoot, apps); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	ms := make([][]float64, len(running))
	pack := make([][]float64, len(running))
	cpu0 := make([]float64, len(running))
	for i, r := range running {
		c, err := servingtest.CPUMs(r.proc.pid())
		if err != nil {
			return nil, err
		}
		cpu0[i] = c
	}
	type floorRuns struct{ wall, cpu []float64 }
	fr := make([]floorRuns, len(floors))
	for round := range o.runs {
		for i, r := range running {
			m, p, err := r.drive(o, sc, repoRoot, apps)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", r.s.name, err)
			}
			ms[i], pack[i] = append(ms[i], m...), append(pack[i], p...)
		}
		for i, f := range floors {
			w, c, err := f.run(tarball, filepath.Join(base, fmt.Sprintf("%s-%d", f.name, round)))
			if err != nil {
				return nil, err
			}
			fr[i].wall, fr[i].cpu = append(fr[i].wall, w), append(fr[i].cpu, c)
		}
	}
	var out []result
	for i, r := range running {
		cpu1, err := servingtest.CPUMs(r.proc.pid())
		if err != nil {
			return nil, err
		}
		res := summarize(r.s, sc, apps, ms[i], pack[i], cpu1-cpu0[i])
		res.rssMiB = servingtest.PeakRSSMiB(r.proc.pid())
		out = append(out, res)
	}
	for i, f := range floors {
		var cpu float64
		for _, c := range fr[i].cpu {
			cpu += c
		}
		out = append(out, result{server: f.name, scenario: sc.name, floor: true,
			afterMs: median(fr[i].wall), minMs: slices.Min(fr[i].wall), cpuMsPerReq: cpu / float64(len(fr[i].cpu))})
	}
	return out, nil
}

// cmpServer is one plugin server running for a scenario.
type cmpServer struct {
	s            server
	proc         *serverProc
	dir, sockets string
	plugin       string
}

func startCMP(base string, s server) (*cmpServer, error) {
	extra := ""
	if s.readOnly {
		extra = "\n  readOnlyRepository: true"
	}
	plugin := "bench-" + s.name
	return startPluginServer(base, s, plugin, fmt.Sprintf(benchPlugin, plugin, extra))
}

// startPluginServer starts s serving pluginYAML (plugin's) in a dir of its
// own under base, pinned to the server CPU, and waits for its socket.
func startPluginServer(base string, s server, plugin, pluginYAML string) (*cmpServer, error) {
	dir, err := os.MkdirTemp(base, s.name+"-")
	if err != nil {
		return nil, err
	}
	r := &cmpServer{s: s, dir: dir, sockets: filepath.Join(dir, "sock"), plugin: plugin}
	config, work := filepath.Join(dir, "config"), filepath.Join(dir, "work")
	for _, d := range []string{config, r.sockets, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(config, "plugin.yaml"), []byte(pluginYAML), 0o644); err != nil {
		return nil, err
	}
	argv := make([]string, len(s.argv))
	for i, a := range s.argv {
		argv[i] = strings.ReplaceAll(a, "CONFIG", config)
	}
	env := append(append([]string(nil), s.env...), "ARGOCD_PLUGINSOCKFILEPATH="+r.sockets, "ARGOCD_CMP_WORKDIR="+work)
	if r.proc, err = startServer(s.name, argv, env, filepath.Join(dir, "server.log")); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	sock := filepath.Join(r.sockets, r.plugin+".sock")
	deadline := time.Now().Add(30 * time.Second)
	for !exists(sock) {
		if time.Now().After(deadline) {
			err := fmt.Errorf("no socket after 30s:\n%s", r.proc.logTail())
			r.stop()
			return nil, err
		}
		time.Sleep(20 * time.Millisecond)
	}
	return r, nil
}

func (r *cmpServer) stop() {
	r.proc.stop()
	_ = os.RemoveAll(r.dir)
}

// drive runs Argo CD's client once per app against the server and returns
// each request's time and packing time in ms.
func (r *cmpServer) drive(o options, sc scenario, repoRoot string, apps []string) (ms, pack []float64, err error) {
	dargv := pinned(0, o.cmpbench, "--sock-dir", r.sockets, "--plugin", r.plugin, "--repo", repoRoot,
		"--app", strings.Join(apps, ","), "--runs", "1")
	c := exec.Command(dargv[0], dargv[1:]...)
	c.Env = append(os.Environ(), sc.env...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		return nil, nil, fmt.Errorf("cmpbench: %w\n%s\nserver log:\n%s", err, errb.String(), r.proc.logTail())
	}
	lines := bufio.NewScanner(&out)
	for lines.Scan() {
		var m struct{ Ms, PackMs float64 }
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			return nil, nil, err
		}
		ms, pack = append(ms, m.Ms), append(pack, m.PackMs)
	}
	return ms, pack, nil
}

// summarize turns one server's requests into its result: per round, the sum
// over the apps (one app: one request).
func summarize(s server, sc scenario, apps []string, ms, pack []float64, cpu float64) result {
	res := result{server: s.name, scenario: sc.name}
	var rounds []float64
	for i := 0; i+len(apps) <= len(ms); i += len(apps) {
		var sum float64
		for _, m := range ms[i : i+len(apps)] {
			sum += m
		}
		rounds = append(rounds, sum)
	}
	sort.Float64s(rounds)
	res.medianMs = rounds[len(rounds)/2]
	res.minMs = rounds[0]
	res.totalMs = res.medianMs
	if len(apps) == 1 {
		sorted := append([]float64(nil), ms...)
		sort.Float64s(sorted)
		res.medianMs, res.minMs = sorted[len(sorted)/2], sorted[0]
		after := make([]float64, len(ms))
		for i := range ms {
			after[i] = ms[i] - pack[i]
		}
		res.packMs, res.afterMs = median(pack), median(after)
	}
	res.cpuMsPerReq = cpu / float64(len(ms))
	if len(apps) > 1 {
		// The monorepo's figure is the whole fan-out's CPU per round.
		res.cpuMsPerReq = cpu / float64(len(rounds))
	}
	return res
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func numCPU() int { return runtime.NumCPU() }

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// genRepo writes files text files of 10 kB (random words and numbers, so gzip
// works as on real YAML) in 50 directories, or under apps/app-NN when apps > 0,
// and commits them to git with the objects packed, as a repo-server's clone
// holds them. It returns the size of the files in MB.
func genRepo(root string, files, apps int) (float64, error) {
	rng := rand.New(rand.NewPCG(uint64(files), uint64(apps)))
	words := strings.Fields("apiVersion kind metadata name namespace spec replicas image tag values chart labels app selector template containers ports env")
	const size = 10_000
	var buf bytes.Buffer
	for i := 0; i < files; i++ {
		d := filepath.Join(root, "d"+strconv.Itoa(i%50))
		if apps > 0 {
			d = filepath.Join(root, "apps", fmt.Sprintf("app-%02d", i%apps), "d"+strconv.Itoa(i%5))
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return 0, err
		}
		buf.Reset()
		for buf.Len() < size {
			buf.WriteString(words[rng.IntN(len(words))])
			buf.WriteString(": ")
			buf.WriteString(strconv.FormatUint(rng.Uint64(), 36))
			buf.WriteByte('\n')
		}
		if err := os.WriteFile(filepath.Join(d, "f"+strconv.Itoa(i)+".yaml"), buf.Bytes()[:size], 0o644); err != nil {
			return 0, err
		}
	}
	if err := commitAll(root, "bench"); err != nil {
		return 0, err
	}
	return float64(files*size) / 1e6, nil
}
