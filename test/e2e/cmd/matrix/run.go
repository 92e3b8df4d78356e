package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// axis is what differs between a Kubernetes row and an Argo CD row: which tools
// hack/tools.sh builds, what the suite is told to run against, which tests run.
type axis struct {
	name string
	// tools are hack/tools.sh's names for version's binaries; env points the
	// suite at them.
	tools func(version string) (tools []string, env []string)
	// run and skip are go test's -run and -skip.
	run, skip string
}

// runner runs rows from the clone at root, logging each row's build and test
// output to logDir.
type runner struct {
	root, logDir string
	timeout      time.Duration
	out          io.Writer
}

// row builds version's tools (from the git repository source when set) and
// runs the axis's scenarios against them.
func (r runner) row(ctx context.Context, a axis, version, source string) Row {
	row := Row{Version: version}
	if source != "" {
		row.Source = "tag " + version + " of the argo-cd repository, with its own ./gitops-engine"
	}
	tools, env := a.tools(version)
	logPath := filepath.Join(r.logDir, a.name+"-"+version+".log")
	log, err := os.Create(logPath)
	if err != nil {
		row.Build, row.BuildReason = "failed", err.Error()
		return row
	}
	defer func() { _ = log.Close() }()

	fmt.Fprintf(r.out, "matrix: %s %s: building %s (log %s)\n", a.name, version, strings.Join(tools, " "), logPath)
	start := time.Now()
	var buildOut bytes.Buffer
	// Builds run at the lowest CPU priority so that, on a shared machine, the
	// suite's own processes (which wait on deadlines) are not starved by them.
	build := exec.CommandContext(ctx, "nice", append([]string{"-n", "19", filepath.Join(r.root, "hack", "tools.sh")}, tools...)...)
	build.Dir = r.root
	if source != "" {
		build.Env = append(os.Environ(), "ARGOCD_SOURCE="+source)
	}
	build.Stdout = io.MultiWriter(log, &buildOut)
	build.Stderr = build.Stdout
	err = build.Run()
	row.BuildSeconds = seconds(time.Since(start))
	switch {
	case err != nil:
		row.Build, row.BuildReason = "failed", buildFailure(buildOut.String(), err)
		fmt.Fprintf(r.out, "matrix: %s %s: cannot build: %s\n", a.name, version, row.BuildReason)
		return row
	case strings.Contains(buildOut.String(), "tools: built "):
		row.Build = "ok"
	default:
		row.Build = "cached"
	}

	fmt.Fprintf(r.out, "matrix: %s %s: built (%s, %.0fs); running the suite\n", a.name, version, row.Build, row.BuildSeconds)
	args := []string{"test", "-json", "-count=1", "-timeout", r.timeout.String()}
	if a.run != "" {
		args = append(args, "-run", a.run)
	}
	if a.skip != "" {
		args = append(args, "-skip", a.skip)
	}
	args = append(args, "./test/e2e/")
	test := exec.CommandContext(ctx, "go", args...)
	test.Dir = r.root
	test.Env = append(os.Environ(), append(env, "PATH="+filepath.Join(r.root, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))...)
	stdout, err := test.StdoutPipe()
	if err != nil {
		row.Build, row.BuildReason = "failed", err.Error()
		return row
	}
	test.Stderr = log
	start = time.Now()
	if err := test.Start(); err != nil {
		row.Build, row.BuildReason = "failed", err.Error()
		return row
	}
	row.Scenarios = scenarios(io.TeeReader(stdout, log))
	werr := test.Wait()
	row.TestSeconds = seconds(time.Since(start))
	if werr != nil && len(row.Scenarios) == 0 {
		// The suite did not get as far as a test (it did not compile, or
		// TestMain could not start the control plane): one failing scenario
		// says so rather than a row that looks untested.
		row.Scenarios = []Scenario{{Name: "suite", Result: "fail", Reason: "go test: " + werr.Error() + " (see " + logPath + ")"}}
	}
	for _, s := range row.Scenarios {
		fmt.Fprintf(r.out, "matrix: %s %s: %-45s %s %.1fs %s\n", a.name, version, s.Name, s.Result, s.Seconds, s.Reason)
	}
	return row
}

// buildFailure is the line that says why a build failed: Go's first error
// line, else the last line printed.
func buildFailure(out string, err error) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, l := range lines {
		if strings.Contains(l, ": error") || strings.Contains(l, "go: ") && !strings.HasPrefix(l, "go: downloading") ||
			strings.Contains(l, "undefined:") || strings.Contains(l, "cannot use") {
			return clip(l)
		}
	}
	if len(lines) > 0 && lines[len(lines)-1] != "" {
		return clip(lines[len(lines)-1])
	}
	return err.Error()
}

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 240 {
		s = s[:240] + "…"
	}
	return s
}

// testEvent is one line of go test -json (cmd/test2json).
type testEvent struct {
	Action  string
	Test    string
	Elapsed float64
	Output  string
}

// scenarios reads go test -json and returns each top-level test's result, in
// the order they finished. A failing one carries the last failure line printed
// by the first of its (sub)tests to fail, prefixed with that subtest's name
// (go test -json cannot tell t.Log from t.Error/t.Fatal; the last line of the
// failing test is most often the t.Fatal) or its panic. Lines are kept per
// (sub)test: a passing sibling's last log line, printed after the failure, is
// not the reason the parent failed.
func scenarios(r io.Reader) []Scenario {
	var out []Scenario
	lastLine := map[string]string{}
	reason := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		var ev testEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Test == "" {
			continue
		}
		top, sub, _ := strings.Cut(ev.Test, "/")
		switch ev.Action {
		case "output":
			if failureLine(ev.Output) {
				lastLine[ev.Test] = clip(ev.Output)
			}
		case "pass", "fail", "skip":
			// Subtests finish before their parent, so the first failing
			// one with a line of its own names the cause.
			if line := lastLine[ev.Test]; ev.Action == "fail" && line != "" && reason[top] == "" {
				if sub != "" {
					line = sub + ": " + line
				}
				reason[top] = line
			}
			if ev.Test == top {
				out = append(out, Scenario{Name: top, Result: ev.Action, Seconds: ev.Elapsed, Reason: reason[top]})
			}
		}
	}
	return out
}

// failureLine is a t.Error/t.Fatal line (file.go:NN: message) or a panic.
func failureLine(s string) bool {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "panic:") {
		return true
	}
	if strings.HasPrefix(s, "---") || strings.HasPrefix(s, "===") {
		return false
	}
	file, _, ok := strings.Cut(s, ": ")
	return ok && strings.Contains(file, "_test.go:")
}
