// Command argoe2e is make e2e-argo: Argo CD's own end-to-end tests of plugins,
// unmodified, against Argo CD's plugin server and ours.
//
// Argo CD's test/e2e package (the pinned release, from the Go module proxy;
// hack/tools.sh argo-e2e.test compiles it with go test -c) runs from a copy of
// its directory, as its Makefile runs it from a checkout: its fixture runs
// ../../dist/argocd for the CLI and, with ARGOCD_BINARY_NAME=argocd-cmp-server,
// for the plugin server a test starts (RunningCMPServer). Run once with dist/argocd
// the release's own binary, once with a dispatcher that runs our cmp-server
// for that name and Argo CD's binary for every other, as a pod runs Argo CD's
// image next to our sidecar. Around it runs what Argo CD's start-e2e-local
// target runs: its test/manifests/base applied, the API server, application
// controller and repo-server under goreman (the fixture asks goreman which
// processes run), Redis, and the fixture's git server. The results go to
// docs/argo-e2e.json and docs/compatibility.md; the command fails when a test
// passes with Argo CD's server and not with ours, or fails with Argo CD's
// server without a reason recorded here (known).
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
	"strings"
	"syscall"
	"time"

	"github.com/cmp-injector/cmp-injector/test/e2e/argosuite"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "argoe2e:", err)
		os.Exit(1)
	}
}

func run() error {
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	var (
		only    string
		servers string
		write   bool
		keep    bool
	)
	flag.StringVar(&only, "run", "", "only the tests this regular expression matches (go test -run)")
	flag.StringVar(&servers, "servers", "argo,ours", "the plugin servers to run the tests with, in column order")
	flag.BoolVar(&write, "write", true, "write docs/argo-e2e.json and docs/compatibility.md")
	flag.BoolVar(&keep, "keep", false, "keep the work directory (logs, the copy of the tests)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	rel, err := harness.NewestArgoRelease()
	if err != nil {
		return err
	}
	src, err := harness.ArgoSource(rel)
	if err != nil {
		return err
	}
	tests, err := pluginTests(filepath.Join(src, "test", "e2e"))
	if err != nil {
		return err
	}
	if only != "" {
		if tests, err = filterTests(tests, only); err != nil {
			return err
		}
	}
	fmt.Printf("argoe2e: Argo CD %s: %d tests start a plugin server\n", rel.Version, len(tests))

	work, err := os.MkdirTemp("", "argoe2e")
	if err != nil {
		return err
	}
	if keep {
		fmt.Printf("argoe2e: work dir %s (kept)\n", work)
	} else {
		defer os.RemoveAll(work)
	}
	s, err := startStack(ctx, root, work, src, rel)
	if s != nil {
		defer s.stop()
	}
	if err != nil {
		return err
	}
	fmt.Printf("argoe2e: control plane, Argo CD and the git server up in %s\n", time.Since(start).Round(time.Second))

	res := &argosuite.Results{
		Commit: gitCommit(root), Started: start.UTC().Format(time.RFC3339),
		Machine: fmt.Sprintf("%s/%s, %d CPUs", runtime.GOOS, runtime.GOARCH, runtime.NumCPU()),
		Argo:    rel.Version, Kube: s.kubeVersion, Servers: strings.Split(servers, ","),
	}
	byName := map[string]*argosuite.Test{}
	for _, t := range tests {
		res.Tests = append(res.Tests, argosuite.Test{Name: t.name, File: t.file, Results: map[string]argosuite.Result{}, Why: known[t.name]})
	}
	for i := range res.Tests {
		byName[res.Tests[i].Name] = &res.Tests[i]
	}
	for _, server := range res.Servers {
		if err := s.usePluginServer(server); err != nil {
			return err
		}
		t0 := time.Now()
		got, err := s.runTests(ctx, tests, server)
		if err != nil {
			return err
		}
		for name, r := range got {
			if t := byName[name]; t != nil {
				t.Results[server] = r
			}
		}
		fmt.Printf("argoe2e: %d tests with the %s plugin server in %s\n", len(tests), server, time.Since(t0).Round(time.Second))
	}
	for i := range res.Tests {
		for _, server := range res.Servers {
			if _, ok := res.Tests[i].Results[server]; !ok {
				res.Tests[i].Results[server] = argosuite.Result{Outcome: "not run"}
			}
		}
	}
	fmt.Print(res.Render())
	if write {
		if err := writeDocs(root, res); err != nil {
			return err
		}
	}
	var problems []string
	for _, name := range res.Regressions() {
		problems = append(problems, fmt.Sprintf("%s passes with Argo CD's plugin server and not with ours: %s", name, byName[name].Results["ours"].Message))
	}
	for _, t := range res.Tests {
		if r, ok := t.Results["argo"]; ok && r.Outcome != "pass" && t.Why == "" {
			problems = append(problems, fmt.Sprintf("%s %s with Argo CD's own plugin server, for no reason known here: %s", t.Name, r.Outcome, r.Message))
		}
	}
	fmt.Printf("argoe2e: total %s\n", time.Since(start).Round(time.Second))
	if len(problems) > 0 {
		return fmt.Errorf("%d problems:\n  %s\n(the tests' whole output is in the work dir; -keep keeps it)", len(problems), strings.Join(problems, "\n  "))
	}
	return nil
}

// writeDocs saves the results and re-renders docs/compatibility.md, whose
// last section they are, with the version matrix's renderer.
func writeDocs(root string, res *argosuite.Results) error {
	if err := res.Save(filepath.Join(root, "docs", "argo-e2e.json")); err != nil {
		return err
	}
	cmd := exec.Command("go", "run", "./test/e2e/cmd/matrix", "-render")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}

func gitCommit(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
