// Package e2e proves the injector and the plugin server against a real
// kube-apiserver and etcd on loopback: the apiserver decides how selectors,
// matchConditions, reinvocation, dry-run, failurePolicy, TLS and native-sidecar
// validation behave, and the injected pod's own containers are then booted as
// local processes to show that the spec works, not just that it looks right.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// env is shared by every scenario: one control plane per test binary keeps the
// suite inside CI's budget (the apiserver takes seconds to start).
var env struct {
	cp      *harness.ControlPlane
	bins    map[string]string
	root    string
	repo    string
	k8sVer  string
	logFile *os.File
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// The child a test kills to prove that a killed run is undone.
	if dir := os.Getenv(nodeChildEnv); dir != "" {
		return nodeChild(dir)
	}
	start := time.Now()
	var err error
	env.repo, err = harness.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Short root: unix socket paths of booted plugin servers live under it.
	env.root, err = os.MkdirTemp("", "cmpe2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(env.root)
	env.logFile, err = os.Create(filepath.Join(env.root, "processes.log"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env.bins, err = harness.BuildBinaries(ctx, filepath.Join(env.root, "bin"), "cmp-injector", "cmp-server")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("e2e: built binaries in %s\n", time.Since(start).Round(time.Millisecond))
	t0 := time.Now()
	env.cp, err = harness.StartControlPlane(filepath.Join(env.root, "cp"), env.logFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "control plane:", err)
		dumpLog()
		return 1
	}
	defer env.cp.Stop()
	env.k8sVer, err = env.cp.Version()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("e2e: etcd + kube-apiserver %s ready in %s\n", env.k8sVer, time.Since(t0).Round(time.Millisecond))
	code := m.Run()
	if code != 0 {
		dumpLog()
	}
	// E2E_PROCESS_LOG keeps every process's whole output for a closer look.
	if dst := os.Getenv("E2E_PROCESS_LOG"); dst != "" {
		if b, err := os.ReadFile(env.logFile.Name()); err == nil {
			_ = os.WriteFile(dst, b, 0o644)
		}
	}
	fmt.Printf("e2e: total %s\n", time.Since(start).Round(time.Millisecond))
	return code
}

// dumpLog prints the tail of every process's output, for a failed run.
func dumpLog() {
	b, err := os.ReadFile(env.logFile.Name())
	if err != nil {
		return
	}
	s := string(b)
	if len(s) > 20000 {
		s = "…" + s[len(s)-20000:]
	}
	fmt.Fprintf(os.Stderr, "---- process output (tail) ----\n%s\n", s)
}

// kubeVersion is the apiserver's version without the leading v, for helm.
func kubeVersion() string { return strings.TrimPrefix(env.k8sVer, "v") }

// minorVersion is "v1.34" for v1.34.4: stored pods carry the apiserver's
// defaults, which may change between minor versions, so goldens are per minor.
func minorVersion() string {
	parts := strings.SplitN(env.k8sVer, ".", 3)
	if len(parts) < 2 {
		return env.k8sVer
	}
	return parts[0] + "." + parts[1]
}
