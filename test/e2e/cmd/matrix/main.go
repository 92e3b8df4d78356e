// Command matrix is make e2e-matrix: the end-to-end suite against every
// Kubernetes minor and the chain against every Argo CD minor, each release's
// binaries built from the Go module proxy like the pinned ones (hack/tools.sh
// kube@vX.Y.Z, argocd@vX.Y.Z). It records every build and scenario in
// docs/compatibility.json after each release, so an interrupted run resumes
// (-resume), and generates docs/compatibility.md and README's Compatibility
// block from it. Nothing in it asserts a time; the times are what the run took.
//
// The versions default to hack/versions.sh's MATRIX_KUBE and MATRIX_ARGOCD: the
// newest served patch of each minor.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

type options struct {
	root, results, logDir string
	kube, argo            []string
	axes                  string
	// argoSource is the argo-cd git repository the releases of
	// MATRIX_ARGOCD_SOURCE are built from (-argocd-source); "": not built.
	argoSource            string
	resume, rerun, render bool
	timeout               time.Duration
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "matrix:", err)
		os.Exit(1)
	}
}

func run() error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	pins, err := readPins(root)
	if err != nil {
		return err
	}
	o := options{root: root}
	var kube, argo string
	flag.StringVar(&kube, "kube", pins["MATRIX_KUBE"], "Kubernetes releases, space or comma separated")
	flag.StringVar(&argo, "argocd", pins["MATRIX_ARGOCD"], "Argo CD releases, space or comma separated")
	flag.StringVar(&o.axes, "axes", "kubernetes,argocd", "which axes to run")
	var argoSource string
	flag.StringVar(&argoSource, "argocd-source", "", "an argo-cd git repository (e.g. the fetch tool's snapshot): also build and run MATRIX_ARGOCD_SOURCE's releases, which the proxy cannot build, from their tags (never CI)")
	flag.StringVar(&o.results, "results", filepath.Join(root, "docs", "compatibility.json"), "results file (read with -resume and -render, written after each release)")
	flag.StringVar(&o.logDir, "logs", filepath.Join(cacheDir(), "matrix-logs"), "directory for each release's build and test log")
	flag.BoolVar(&o.resume, "resume", false, "keep the releases the results file has finished and run only the rest")
	flag.BoolVar(&o.rerun, "rerun", false, "with -resume, run the releases given even when the results file has finished them")
	flag.BoolVar(&o.render, "render", false, "only rewrite docs/compatibility.md and README's block from the results file")
	flag.DurationVar(&o.timeout, "timeout", 40*time.Minute, "go test -timeout of one release")
	flag.Parse()
	o.kube, o.argo = fields(kube), fields(argo)
	if argoSource != "" {
		if o.argoSource, err = filepath.Abs(argoSource); err != nil {
			return err
		}
		for _, v := range fields(pins["MATRIX_ARGOCD_SOURCE"]) {
			if !slices.Contains(o.argo, v) {
				o.argo = append(o.argo, v)
			}
		}
	}

	res, err := loadResults(o.results)
	if err != nil {
		return err
	}
	// What hack/versions.sh plans now, for the documents' "not run yet".
	res.PlannedKube, res.PlannedArgo = fields(pins["MATRIX_KUBE"]), plannedArgo(pins, res, o.argoSource != "")
	if o.render {
		return write(o, res)
	}
	if !o.resume {
		res = &Results{}
	}
	if res.Started == "" {
		res.Started = time.Now().UTC().Format(time.RFC3339)
	}
	res.Commit, err = commit(root)
	if err != nil {
		return err
	}
	res.Machine = fmt.Sprintf("%d cores, %s/%s, %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, goVersion())
	res.AnchorKube = pins["KUBE_VERSION"]
	res.AnchorArgo = []string{pins["ARGOCD_VERSION"], pins["ARGOCD_V2_VERSION"]}
	res.Etcd = pins["ETCD_VERSION"]
	if err := os.MkdirAll(o.logDir, 0o755); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r := runner{root: root, logDir: o.logDir, timeout: o.timeout, out: os.Stdout}
	start := time.Now()
	prior := res.WallSeconds
	for _, step := range plan(o, pins) {
		rows := &res.Kube
		if step.axis.name == "argocd" {
			rows = &res.Argo
		}
		if done, ok := find(*rows, step.version); o.resume && !o.rerun && ok && done.Done() {
			fmt.Printf("matrix: %s %s: done in an earlier run, kept\n", step.axis.name, step.version)
			continue
		}
		row := r.row(ctx, step.axis, step.version, step.source)
		row.Commit = res.Commit
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted during %s %s; rerun with -resume", step.axis.name, step.version)
		}
		*rows = put(*rows, row)
		res.WallSeconds = prior + seconds(time.Since(start))
		if err := write(o, res); err != nil {
			return err
		}
	}
	fmt.Printf("matrix: done in %s; wrote %s, docs/compatibility.md and README.md\n", time.Since(start).Round(time.Second), o.results)
	return nil
}

// plannedArgo is MATRIX_ARGOCD, and the releases of MATRIX_ARGOCD_SOURCE
// that are built from source in this run (withSource) or were in an earlier
// one: a -render without the repository keeps them.
func plannedArgo(pins map[string]string, res *Results, withSource bool) []string {
	planned := fields(pins["MATRIX_ARGOCD"])
	for _, v := range fields(pins["MATRIX_ARGOCD_SOURCE"]) {
		if _, ran := find(res.Argo, v); (withSource || ran) && !slices.Contains(planned, v) {
			planned = append(planned, v)
		}
	}
	return planned
}

// suiteTools is what the end-to-end suite needs whatever the Kubernetes
// release: the Makefile's E2E_TOOLS without the API servers and controller
// managers (a test keeps the two lists equal).
var suiteTools = []string{"etcd", "helm", "kustomize", "jsonnet", "sops", "helmfile", "argocd-vault-plugin", "ytt", "tk", "cdk8s", "age-keygen", "redis-server",
	"argocd", "repoclient", "cmpbench", "argocd-v2", "repoclient-v2", "argocd-operator", "kwok"}

// vaultEnv turns on the suite's Vault tests (make e2e sets it), which
// otherwise skip.
const vaultEnv = "E2E_VAULT=1"

type step struct {
	axis    axis
	version string
	// source is the git repository the release is built from (hack/tools.sh's
	// ARGOCD_SOURCE); "": the Go module proxy.
	source string
}

// plan is every release of the chosen axes, Kubernetes first.
func plan(o options, pins map[string]string) []step {
	kube := axis{
		name: "kubernetes",
		// Every test but the real node, which runs the pinned kubelet.
		skip: "TestRealNode",
		tools: func(cell string) ([]string, []string) {
			// What the suite needs whatever the release, then the release's
			// kube-apiserver and kube-controller-manager: a pin's own tools,
			// else the matrix build (bin/kube-apiserver-X.Y).
			// Vault too, with its tests on, as make e2e runs them.
			tools := append(append([]string{}, suiteTools...), "vault")
			env := []string{vaultEnv}
			v, gates := kubeCell(cell)
			if gates != "" {
				env = append(env, "E2E_KUBE_APISERVER_ARGS=--feature-gates="+gates)
			}
			apiserver := "kube-apiserver-" + minor(v)
			switch v {
			case pins["KUBE_VERSION"]:
				apiserver = "kube-apiserver"
				return append(tools, apiserver, "kube-controller-manager"), append(env, "E2E_KUBE_APISERVER="+apiserver)
			case pins["KUBE_PREV_VERSION"]:
				return append(tools, apiserver, "kube-controller-manager-"+minor(v)), append(env, "E2E_KUBE_APISERVER="+apiserver)
			}
			// The stored-pod goldens are per minor: a minor without them
			// records what its API server stored instead of failing.
			return append(tools, "kube@"+v),
				append(env, "E2E_KUBE_APISERVER="+apiserver, "E2E_RECORD_GOLDENS="+filepath.Join(o.logDir, "goldens-"+cell))
		},
	}
	argo := axis{
		name: "argocd",
		// The chain, and the whole Argo CD (API server, application
		// controller, Applications) where a release's row has run since it
		// joined: a cell of an older run says "–" for it.
		run: "^(TestRealChain|TestApplicationsThroughArgoCD)$",
		tools: func(v string) ([]string, []string) {
			base := []string{"etcd", "helm", "kube-apiserver", "kube-controller-manager", "redis-server"}
			switch v {
			case pins["ARGOCD_VERSION"]:
				return append(base, "argocd", "repoclient"), []string{"E2E_ARGOCD=argocd:repoclient"}
			case pins["ARGOCD_V2_VERSION"]:
				return append(base, "argocd-v2", "repoclient-v2"), []string{"E2E_ARGOCD=argocd-v2:repoclient-v2"}
			}
			m := minor(v)
			env := []string{"E2E_ARGOCD=argocd-" + m + ":repoclient-" + m}
			return append(base, "argocd@"+v), append(env, goCipherEnv(v)...)
		},
	}
	var steps []step
	if strings.Contains(o.axes, "kubernetes") {
		for _, v := range o.kube {
			steps = append(steps, step{axis: kube, version: v})
		}
	}
	if strings.Contains(o.axes, "argocd") {
		fromSource := map[string]bool{}
		for _, v := range fields(pins["MATRIX_ARGOCD_SOURCE"]) {
			fromSource[v] = true
		}
		for _, v := range o.argo {
			st := step{axis: argo, version: v}
			if fromSource[v] && o.argoSource != "" {
				st.source = o.argoSource
			}
			steps = append(steps, st)
		}
	}
	return steps
}

// kubeCell splits a Kubernetes cell, a release with feature gates for its
// kube-apiserver each after a "+" (v1.28.15+SidecarContainers=true: v1.28's
// native sidecars are alpha, off unless the gate is on), into the release and
// the gates as --feature-gates takes them (comma separated: a comma would
// split the cell in -kube's list). The cell is the row's name; the release's
// tools are the ones a plain cell of it builds.
func kubeCell(cell string) (release, gates string) {
	release, gates, _ = strings.Cut(cell, "+")
	return release, strings.ReplaceAll(gates, "+", ",")
}

// goCipherEnv is the TLS setting an Argo CD release needs to start when it
// is built with this Go rather than its own. Argo CD before v2.12 defaults its
// servers' TLS 1.2 ciphers (--tlsciphers, ARGOCD_TLS_CIPHERS) to
// "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384:TLS_RSA_WITH_AES_256_GCM_SHA384" and
// looks each name up in crypto/tls.CipherSuites(); Go moved the RSA key
// exchange suites to InsecureCipherSuites(), so the repo-server exits at start
// ("invalid cipher suite specified"). Their released images, built with their
// own Go, are not affected, and v2.12 dropped the RSA suite from the default.
// The matrix sets the part of Argo's own default that Go still lists, through
// Argo's own setting; the booted processes inherit the test's environment.
func goCipherEnv(v string) []string {
	if p := versionParts(v); p[0] == 2 && p[1] < 12 {
		return []string{"ARGOCD_TLS_CIPHERS=TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"}
	}
	return nil
}

// write regenerates docs/compatibility.md and README's block from res and saves it.
func write(o options, res *Results) error {
	if err := res.save(o.results); err != nil {
		return err
	}
	page, err := renderPage(o.root, res)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.root, "docs", "compatibility.md"), []byte(page), 0o644); err != nil {
		return err
	}
	readme := filepath.Join(o.root, "README.md")
	b, err := os.ReadFile(readme)
	if err != nil {
		return err
	}
	out, err := replaceBlock(string(b), renderReadme(res))
	if err != nil {
		return err
	}
	return os.WriteFile(readme, []byte(out), 0o644)
}

// readPins reads hack/versions.sh and hack/tools.sh's VAR=value lines through bash,
// so the matrix and the builds agree on every pin.
func readPins(root string) (map[string]string, error) {
	script := `. hack/versions.sh; eval "$(grep -E '^[A-Z_]+_VERSION=' hack/tools.sh)"; ` +
		`for v in ETCD_VERSION KUBE_VERSION KUBE_PREV_VERSION ARGOCD_VERSION ARGOCD_V2_VERSION MATRIX_KUBE MATRIX_ARGOCD MATRIX_ARGOCD_SOURCE; do printf '%s=%s\n' "$v" "${!v}"; done`
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("reading pins: %w", err)
	}
	pins := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(l, "=")
		pins[k] = v
	}
	for _, k := range []string{"KUBE_VERSION", "ARGOCD_VERSION", "MATRIX_KUBE", "MATRIX_ARGOCD"} {
		if pins[k] == "" {
			return nil, fmt.Errorf("hack/versions.sh or hack/tools.sh sets no %s", k)
		}
	}
	return pins, nil
}

func fields(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' })
}

func repoRoot() (string, error) {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("run it inside the clone: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// commit is HEAD, marked -dirty when the tree has uncommitted changes to what
// the suite runs (the generated documents themselves do not count).
func commit(root string) (string, error) {
	out, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		return "", err
	}
	c := strings.TrimSpace(string(out))
	st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--", ".",
		":!docs/compatibility.json", ":!docs/compatibility.md", ":!README.md").Output()
	if err != nil {
		return "", err
	}
	if len(strings.TrimSpace(string(st))) > 0 {
		c += "-dirty"
	}
	return c, nil
}

func goVersion() string {
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return runtime.Version()
	}
	return strings.TrimSpace(string(out))
}

func cacheDir() string {
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "cmp-injector")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "cmp-injector")
}
