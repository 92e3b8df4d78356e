// Command bench is the performance suite users can rerun (`make bench-e2e`). It
// measures, side by side in one run:
//
//   - plugin servers driven by Argo CD's own repo-server code (cmpbench:
//     reposerver/repository.GenerateManifests naming a sidecar plugin): ours and,
//     when cached, Argo CD's argocd-cmp-server, on generated git repositories of
//     200, 1,000 and 5,000 files and a 20-app monorepo at one revision, with the
//     repo-server's stock settings and with the tuning the injector applies;
//   - a refresh of a monorepo's Applications (half discovered, half naming
//     the plugin) with the controller's fan-out, Argo CD's server with the
//     stock settings against ours with the injector's, readOnlyRepository,
//     manifest-generate-paths and the render cache (refresh.go);
//   - the webhook: our injector against a no-op TLS webhook built into this
//     command, at 1, 16 and 64 concurrent clients, and one 50-container pod.
//
// Servers run pinned to CPU 1 and clients to CPU 0 when taskset is available.
// Everything is printed as tables with ratios to the anchor of the same run;
// nothing asserts a time. Figures on a shared machine are noisy: rerun and look
// at the spread (--repeat).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// The tuned repo-server's settings are what the injector sets by default.
var (
	tunedChunkSize  = catalog.DefaultCMPChunkSize
	tunedExclusions = strings.Join(catalog.DefaultPluginTarExclusions, ";")
)

// binaries is a repeatable NAME=PATH flag.
type binaries []named

type named struct{ name, path string }

func (b *binaries) String() string { return fmt.Sprint(*b) }

func (b *binaries) Set(v string) error {
	name, path, ok := strings.Cut(v, "=")
	if !ok {
		name, path = filepath.Base(v), v
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	*b = append(*b, named{name, abs})
	return nil
}

type options struct {
	only      string
	runs      int
	repeat    int
	sizes     []int
	workRoot  string
	servers   binaries
	injectors binaries
	argo      string
	cmpbench  string
	chunk     int
	exclude   string
	monorepo  bool
	// refreshSize and refreshRounds: the refresh of a monorepo's apps.
	refreshSize   string
	refreshRounds int
	// refreshRows keeps only these rows of the refresh (names as printed);
	// Argo CD's, the anchor, always runs. Empty: every row.
	refreshRows []string
	webhookFor  time.Duration
	concurrency []int
	protos      []string
	// webhookRounds of every load, interleaved across the targets.
	webhookRounds int
	// goals collects the pass lines printed after each repetition.
	goals *goals
}

func main() {
	if len(os.Args) > 1 {
		// Subcommands this binary runs in pinned child processes.
		switch os.Args[1] {
		case "floor":
			fatal(floorMain(os.Args[2:]))
			return
		case "load":
			fatal(loadMain(os.Args[2:]))
			return
		case "unpack":
			fatal(unpackMain(os.Args[2:]))
			return
		}
	}
	var o options
	sizes := flag.String("sizes", "200,1000,5000", "repository sizes in files (10 kB each), comma-separated")
	conc := flag.String("concurrency", "1,16,64", "webhook client concurrencies")
	protos := flag.String("webhook-protos", "http/1.1,h2", "webhook protocols to measure, in order: http/1.1 (how kube-apiserver calls a Service) and h2 (a localhost URL)")
	flag.StringVar(&o.only, "only", "all", "cmp, refresh, webhook or all")
	flag.IntVar(&o.runs, "runs", 5, "measured requests per repository and server (after one warm-up)")
	flag.IntVar(&o.repeat, "repeat", 1, "repeat the whole comparison this many times, to see the spread")
	flag.StringVar(&o.workRoot, "work-root", harness.MemoryWorkRoot(), "where repositories and request dirs live (tmpfs by default, as in a memory-backed emptyDir)")
	flag.Var(&o.servers, "server", "NAME=PATH of a cmp-server binary to measure (repeatable; default ours=bin/cmp-server)")
	flag.Var(&o.injectors, "injector", "NAME=PATH of a cmp-injector binary to measure (repeatable; default ours=bin/cmp-injector)")
	flag.StringVar(&o.argo, "argocd", "", "Argo CD's multi-call binary, run as argocd-cmp-server (default bin/argocd when present)")
	flag.StringVar(&o.cmpbench, "cmpbench", "", "the driver built from Argo CD's code (default bin/cmpbench)")
	flag.IntVar(&o.chunk, "tuned-chunk-size", tunedChunkSize, "ARGOCD_CMP_CHUNK_SIZE of the tuned repo-server")
	flag.StringVar(&o.exclude, "tuned-exclusions", tunedExclusions, "ARGOCD_REPO_SERVER_PLUGIN_TAR_EXCLUSIONS of the tuned repo-server")
	flag.BoolVar(&o.monorepo, "monorepo", true, "also the 20-app monorepo")
	flag.StringVar(&o.refreshSize, "refresh-size", "quick", "the refresh of a monorepo's Applications: quick (20 apps, 600 files), 100 or 500 (apps, on 3,000 files / 30 MB)")
	flag.IntVar(&o.refreshRounds, "refresh-rounds", 3, "refreshes per row, rows taking turns; the median is printed")
	rows := flag.String("refresh-rows", "", "only these rows of the refresh, comma-separated names as printed (e.g. ours,ours-mgp); Argo CD's always runs")
	flag.DurationVar(&o.webhookFor, "webhook-duration", 2*time.Second, "load duration per webhook concurrency and round")
	flag.IntVar(&o.webhookRounds, "webhook-rounds", 3, "rounds of every webhook load, interleaved across the targets; the median is printed")
	flag.Parse()
	var err error
	if o.sizes, err = ints(*sizes); err != nil {
		fatal(err)
	}
	if o.concurrency, err = ints(*conc); err != nil {
		fatal(err)
	}
	if *rows != "" {
		o.refreshRows = strings.Split(*rows, ",")
	}
	for _, p := range strings.Split(*protos, ",") {
		if _, ok := protoTitle[p]; !ok {
			fatal(fmt.Errorf("--webhook-protos: %q is not http/1.1 or h2", p))
		}
		o.protos = append(o.protos, p)
	}
	fatal(run(o))
}

func run(o options) error {
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	if len(o.servers) == 0 {
		o.servers = binaries{{"ours", filepath.Join(root, "bin", "cmp-server")}}
	}
	if len(o.injectors) == 0 {
		o.injectors = binaries{{"ours", filepath.Join(root, "bin", "cmp-injector")}}
	}
	if o.argo == "" {
		if p := filepath.Join(root, "bin", "argocd"); exists(p) {
			o.argo = p
		}
	}
	if o.cmpbench == "" {
		o.cmpbench = filepath.Join(root, "bin", "cmpbench")
	}
	fmt.Printf("bench: %s, pinning: %s (a pinned Go server sees one CPU and sizes GOMAXPROCS to 1), work root %s\n", time.Now().UTC().Format(time.RFC3339), pinningNote(), o.workRoot)
	o.goals = &goals{}
	for i := 0; i < o.repeat; i++ {
		if o.repeat > 1 {
			fmt.Printf("\n######## repetition %d of %d\n", i+1, o.repeat)
		}
		if o.only == "all" || o.only == "cmp" {
			if err := runCMP(o); err != nil {
				return err
			}
		}
		if o.only == "all" || o.only == "refresh" {
			if err := runRefresh(o); err != nil {
				return err
			}
		}
		if o.only == "all" || o.only == "webhook" {
			if err := runWebhook(o); err != nil {
				return err
			}
		}
		o.goals.print()
	}
	return nil
}

// pinned wraps argv in taskset -c cpu when taskset exists and the machine has
// more than one CPU.
func pinned(cpu int, argv ...string) []string {
	if ts, err := exec.LookPath("taskset"); err == nil && numCPU() > 1 {
		return append([]string{ts, "-c", fmt.Sprint(cpu)}, argv...)
	}
	return argv
}

func pinningNote() string {
	if _, err := exec.LookPath("taskset"); err == nil && numCPU() > 1 {
		return "servers on CPU 1, clients on CPU 0 (taskset)"
	}
	return "none (no taskset or one CPU)"
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(f), &n); err != nil {
			return nil, fmt.Errorf("bad number %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func fatal(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
