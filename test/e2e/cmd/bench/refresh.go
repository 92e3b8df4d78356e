package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// The refresh (issue 40): a monorepo with N Applications refreshed at once,
// as users feel it, through Argo CD's repo-server code (cmpbench) with the
// application controller's stock fan-out (its 20 status processors: 20
// GenerateManifest calls in flight, the repo-server's parallelism limit
// unset). Half the Applications name the plugin, half are discovered; the
// plugin's discovery rule (a kustomization.yaml in the app) is what Argo CD
// documents. Hard refresh: nothing is cached by the repo-server.

// refreshStatusProcessors is the controller's --status-processors default.
const refreshStatusProcessors = 20

// refreshConfig is one row: a plugin server and the repo-server settings it
// is measured with.
type refreshConfig struct {
	name, what string
	argv       []string
	env        []string // the server's
	repoEnv    []string // the repo-server's (cmpbench's)
	readOnly   bool
	mgp        bool // --plugin-use-manifest-generate-paths, every app annotated "."
	// cached: the server's render cache on; the row's figure is a second
	// refresh after a commit that changes a file outside every app.
	cached bool
}

func refreshConfigs(o options) []refreshConfig {
	stock := []string{}
	tuned := []string{"ARGOCD_CMP_CHUNK_SIZE=" + strconv.Itoa(o.chunk), "ARGOCD_REPO_SERVER_PLUGIN_TAR_EXCLUSIONS=" + o.exclude}
	var out []refreshConfig
	if o.argo != "" {
		out = append(out, refreshConfig{name: "argo", what: "argocd-cmp-server, stock repo-server (what users have)",
			argv: []string{o.argo, "--config-dir-path", "CONFIG"}, env: []string{"ARGOCD_BINARY_NAME=argocd-cmp-server"}, repoEnv: stock})
	}
	for _, b := range o.servers {
		ours := []string{b.path, "serve", "--config-dir-path", "CONFIG"}
		out = append(out,
			refreshConfig{name: b.name, what: "cmp-server, the injector's repo-server settings", argv: ours, repoEnv: tuned},
			refreshConfig{name: b.name + "-ro", what: "+ readOnlyRepository", argv: ours, repoEnv: tuned, readOnly: true},
			refreshConfig{name: b.name + "-mgp", what: "+ manifest-generate-paths (opt-in)", argv: ours, repoEnv: tuned, readOnly: true, mgp: true},
			refreshConfig{name: b.name + "-cache", what: "+ render cache, refresh after a commit outside every app", argv: ours, repoEnv: tuned, readOnly: true, mgp: true, cached: true,
				env: []string{keys.EnvRenderCacheSize + "=" + strconv.Itoa(64<<20), keys.EnvRenderCacheRevisionIndependent + "=true"}})
	}
	if len(o.refreshRows) == 0 {
		return out
	}
	return slices.DeleteFunc(out, func(c refreshConfig) bool { return c.name != "argo" && !slices.Contains(o.refreshRows, c.name) })
}

// checkRefreshRows refuses a --refresh-rows name that is no row.
func checkRefreshRows(o options) error {
	every := o
	every.refreshRows = nil
	var names []string
	for _, c := range refreshConfigs(every) {
		names = append(names, c.name)
	}
	for _, want := range o.refreshRows {
		if !slices.Contains(names, want) {
			return fmt.Errorf("--refresh-rows: no row %q (rows: %s)", want, strings.Join(names, ", "))
		}
	}
	return nil
}

// refreshResult is one row's figures, medians over the rounds.
type refreshResult struct {
	cfg                  refreshConfig
	wallMs, minMs, maxMs float64
	repoCPUMs, sideCPUMs float64
	rssMiB               float64
	bytes                int64
	streams              int
}

func runRefresh(o options) error {
	size, ok := harness.RefreshSizes[o.refreshSize]
	if !ok {
		return fmt.Errorf("--refresh-size %q: want quick, 100 or 500", o.refreshSize)
	}
	if err := checkRefreshRows(o); err != nil {
		return err
	}
	if !exists(o.cmpbench) {
		return fmt.Errorf("%s is missing: run `hack/tools.sh cmpbench`", o.cmpbench)
	}
	base, err := os.MkdirTemp(o.workRoot, "refresh-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(base)
	root := filepath.Join(base, "mono")
	mb, err := genMonorepo(root, size)
	if err != nil {
		return err
	}
	var named, discovered []string
	for i := range size.Apps {
		app := harness.RefreshApp(i)
		if i%2 == 0 {
			named = append(named, app)
		} else {
			discovered = append(discovered, app)
		}
	}
	fmt.Printf("\n== refresh of %d Applications (%d naming the plugin, %d discovered) on one monorepo of %d files / %.0f MB, %d requests in flight (the controller's status processors), through Argo CD's repo-server code; %d rounds, rows taking turns, a fresh server per refresh\n",
		size.Apps, len(named), len(discovered), size.Files, mb, refreshStatusProcessors, o.refreshRounds)
	cfgs := refreshConfigs(o)
	runs := make([][]refreshResult, len(cfgs))
	for round := range o.refreshRounds {
		for i, c := range cfgs {
			r, err := refreshOnce(o, base, root, c, named, discovered, round)
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			runs[i] = append(runs[i], r)
		}
	}
	var results []refreshResult
	for i, c := range cfgs {
		r := medianRefresh(c, runs[i])
		// What is sent depends on the row's settings only: packed once.
		if r.bytes, r.streams, err = streamed(base, root, c, len(named), len(discovered)); err != nil {
			return err
		}
		results = append(results, r)
	}
	printRefresh(results)
	o.goals.fromRefresh(results, size.Apps)
	return nil
}

// refreshOnce starts a fresh server for c, refreshes every app once (the
// cached row: twice, around a commit outside every app, and measures the
// second), and stops it.
func refreshOnce(o options, base, root string, c refreshConfig, named, discovered []string, round int) (refreshResult, error) {
	srv, err := startRefreshServer(base, c)
	if err != nil {
		return refreshResult{}, err
	}
	defer srv.stop()
	res := refreshResult{cfg: c}
	rev := fmt.Sprintf("%040x", round*2+1)
	if c.cached {
		if _, _, err := srv.refresh(o, c, root, named, discovered, rev); err != nil {
			return res, err
		}
		if err := commitOutsideApps(root); err != nil {
			return res, err
		}
		rev = fmt.Sprintf("%040x", round*2+2)
	}
	cpu0, err := servingtest.CPUMs(srv.proc.pid())
	if err != nil {
		return res, err
	}
	wall, repoCPU, err := srv.refresh(o, c, root, named, discovered, rev)
	if err != nil {
		return res, err
	}
	cpu1, err := servingtest.CPUMs(srv.proc.pid())
	if err != nil {
		return res, err
	}
	res.wallMs, res.repoCPUMs, res.sideCPUMs = wall, repoCPU, cpu1-cpu0
	res.rssMiB = servingtest.PeakRSSMiB(srv.proc.pid())
	return res, nil
}

func startRefreshServer(base string, c refreshConfig) (*cmpServer, error) {
	extra := ""
	if c.readOnly {
		extra = "\n  readOnlyRepository: true"
	}
	return startPluginServer(base, server{name: c.name, argv: c.argv, env: c.env}, harness.RefreshPluginName, harness.RefreshPluginYAML(extra))
}

// refresh runs one refresh of every app with cmpbench, pinned to the client
// CPU: its wall time and the repo-server's CPU (cmpbench's own), in ms.
func (r *cmpServer) refresh(o options, c refreshConfig, root string, named, discovered []string, rev string) (wall, cpu float64, err error) {
	args := []string{o.cmpbench, "--sock-dir", r.sockets, "--plugin", r.plugin, "--repo", root,
		"--app", strings.Join(named, ","), "--discover-app", strings.Join(discovered, ","),
		"--concurrency", strconv.Itoa(refreshStatusProcessors), "--revision", rev}
	if c.mgp {
		args = append(args, "--manifest-generate-paths")
	}
	argv := pinned(0, args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), c.repoEnv...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return 0, 0, fmt.Errorf("cmpbench: %w\n%s\nserver log:\n%s", err, tail(errb.String(), 2000), r.proc.logTail())
	}
	var n int
	lines := bufio.NewScanner(&out)
	for lines.Scan() {
		var m struct {
			Manifests int
			TotalMs   float64
		}
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			return 0, 0, err
		}
		if m.TotalMs > 0 {
			wall = m.TotalMs
			continue
		}
		if m.Manifests != 1 {
			return 0, 0, fmt.Errorf("an app rendered %d objects, want 1: %s", m.Manifests, lines.Text())
		}
		n++
	}
	if want := len(named) + len(discovered); n != want {
		return 0, 0, fmt.Errorf("%d apps rendered, want %d", n, want)
	}
	ps := cmd.ProcessState
	return wall, float64((ps.UserTime() + ps.SystemTime()).Microseconds()) / 1000, nil
}

// streamed is what the repo-server sends in one refresh under c: its tarball
// for every stream. Discovery (MatchRepository) always sends the whole
// repository: twice for a discovered app (the source type, then the plugin),
// once for a named one (the plugin's discovery is configured); generation
// sends the whole repository, or with manifest-generate-paths the app's dir.
func streamed(base, root string, c refreshConfig, named, discovered int) (int64, int, error) {
	exclude := []string{}
	for _, e := range c.repoEnv {
		if v, ok := strings.CutPrefix(e, "ARGOCD_REPO_SERVER_PLUGIN_TAR_EXCLUSIONS="); ok && v != "" {
			exclude = strings.Split(v, ";")
		}
	}
	whole, err := client.WriteTarball(root, base, exclude)
	if err != nil {
		return 0, 0, err
	}
	_ = whole.Remove()
	gen := whole.Size
	if c.mgp {
		app, err := client.WriteTarball(filepath.Join(root, "apps", "app-000"), base, exclude)
		if err != nil {
			return 0, 0, err
		}
		_ = app.Remove()
		gen = app.Size
	}
	matches := 2*discovered + named
	return int64(matches)*whole.Size + int64(named+discovered)*gen, matches + named + discovered, nil
}

func medianRefresh(c refreshConfig, rs []refreshResult) refreshResult {
	pick := func(f func(refreshResult) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		return median(v)
	}
	walls := make([]float64, len(rs))
	for i, r := range rs {
		walls[i] = r.wallMs
	}
	return refreshResult{cfg: c, wallMs: median(walls), minMs: slices.Min(walls), maxMs: slices.Max(walls),
		repoCPUMs: pick(func(r refreshResult) float64 { return r.repoCPUMs }),
		sideCPUMs: pick(func(r refreshResult) float64 { return r.sideCPUMs }),
		rssMiB:    pick(func(r refreshResult) float64 { return r.rssMiB })}
}

func printRefresh(rs []refreshResult) {
	var anchor *refreshResult
	for i := range rs {
		if rs[i].cfg.name == "argo" {
			anchor = &rs[i]
		}
	}
	ratio := func(v, a float64) string {
		if anchor == nil || a <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", v/a)
	}
	fmt.Printf("  %-11s %9s %13s %6s %14s %6s %16s %6s %12s %6s %9s %8s\n", "row", "wall ms", "min-max", "× argo", "repo-s CPU ms", "× argo",
		"sidecar CPU ms", "× argo", "sidecar MiB", "× argo", "MB sent", "streams")
	for _, r := range rs {
		var a refreshResult
		if anchor != nil {
			a = *anchor
		}
		fmt.Printf("  %-11s %9.0f %13s %6s %14.0f %6s %16.0f %6s %12.1f %6s %9.1f %8d\n", r.cfg.name, r.wallMs,
			fmt.Sprintf("%.0f-%.0f", r.minMs, r.maxMs), ratio(r.wallMs, a.wallMs), r.repoCPUMs, ratio(r.repoCPUMs, a.repoCPUMs),
			r.sideCPUMs, ratio(r.sideCPUMs, a.sideCPUMs), r.rssMiB, ratio(r.rssMiB, a.rssMiB), float64(r.bytes)/1e6, r.streams)
	}
	for _, r := range rs {
		fmt.Printf("  %-11s %s\n", r.cfg.name, r.cfg.what)
	}
	fmt.Println("  (repo-s CPU: the repo-server code's (cmpbench's) packing and sending; sidecar CPU: the plugin server's and its commands';")
	fmt.Println("   sidecar MiB: its peak RSS (VmHWM); MB sent and streams: the tarballs the repo-server's client sends, from their sizes)")
}

// genMonorepo writes the refresh's monorepo of size (harness.Monorepo) and
// commits it with packed objects, as a clone holds it. It returns the files'
// size in MB.
func genMonorepo(root string, size harness.RefreshSize) (float64, error) {
	mb, err := harness.Monorepo(root, size)
	if err != nil {
		return 0, err
	}
	return mb, commitAll(root, "monorepo")
}

// commits numbers the commits outside every app, so each changes the file.
var commits int

// commitOutsideApps changes one doc, outside every app, and commits it.
func commitOutsideApps(root string) error {
	commits++
	if err := os.WriteFile(filepath.Join(root, "docs", "CHANGELOG.md"), []byte(fmt.Sprintf("change %d\n", commits)), 0o644); err != nil {
		return err
	}
	if err := git(root, "add", "-A"); err != nil {
		return err
	}
	return git(root, "commit", "-q", "-m", "docs")
}

// commitAll makes root a git repository of one commit holding everything,
// its objects packed, as a repo-server's clone holds them.
func commitAll(root, message string) error {
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", message}, {"repack", "-adq"}, {"prune-packed"}} {
		if err := git(root, args...); err != nil {
			return err
		}
	}
	return nil
}

func git(dir string, args ...string) error {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.com",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}
