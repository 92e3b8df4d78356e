package main

import (
	"bufio"
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cmp-injector/cmp-injector/test/e2e/argosuite"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// known are the tests that cannot pass here whatever the plugin server, and
// why; a test that fails with Argo CD's own server and is not listed fails
// the run.
var known = map[string]string{}

// argoTest is one of Argo CD's tests that starts a plugin server.
type argoTest struct{ name, file string }

// pluginTests finds the tests of dir (Argo CD's test/e2e) whose body calls
// RunningCMPServer, the fixture's way to start a plugin server.
func pluginTests(dir string) ([]argoTest, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	var out []argoTest
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			return nil, err
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Body == nil {
				continue
			}
			found := false
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "RunningCMPServer" {
					found = true
				}
				return !found
			})
			if found {
				out = append(out, argoTest{name: fn.Name.Name, file: filepath.Base(f)})
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no test in %s calls RunningCMPServer", dir)
	}
	return out, nil
}

func filterTests(tests []argoTest, expr string) ([]argoTest, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("-run: %w", err)
	}
	var out []argoTest
	for _, t := range tests {
		if re.MatchString(t.name) {
			out = append(out, t)
		}
	}
	return out, nil
}

// runTests runs Argo CD's compiled test package once over tests, from the
// copy of its directory, and reads each test's result from its -test.v
// output (kept in the work dir as tests-<server>.log). Whatever the tests
// left running (their fixture never stops the plugin servers it starts) is
// killed with the test binary's process group.
func (s *stack) runTests(ctx context.Context, tests []argoTest, server string) (map[string]argosuite.Result, error) {
	var names []string
	for _, t := range tests {
		names = append(names, regexp.QuoteMeta(t.name))
	}
	sort.Strings(names)
	logPath := filepath.Join(s.work, "tests-"+server+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	argv := []string{s.e2eTest, "-test.v", "-test.count=1", "-test.timeout=60m", "-test.run", "^(" + strings.Join(names, "|") + ")$"}
	p, err := harness.Start("argo e2e ("+server+")", argv, s.testEnv(), filepath.Join(s.src, "test", "e2e"), logf)
	if err != nil {
		return nil, err
	}
	pgid := p.PID()
	defer func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) }()
	done := make(chan error, 1)
	go func() { done <- p.Wait(70 * time.Minute) }()
	select {
	case <-ctx.Done():
		_ = p.Stop(5 * time.Second)
		return nil, ctx.Err()
	case <-done:
	}
	// Every plugin server a test started is in the test binary's group.
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	time.Sleep(time.Second)
	return parseResults(p.Output())
}

// testLine is go test -v's verdict line of a top-level test.
var testLine = regexp.MustCompile(`^--- (PASS|FAIL|SKIP): (Test\S+) \(([0-9.]+)s\)$`)

// parseResults reads the verdict of each top-level test and, for failures
// and skips, what the test logged about it (in -v mode a test's log comes
// between its === RUN line and its verdict).
func parseResults(out string) (map[string]argosuite.Result, error) {
	got := map[string]argosuite.Result{}
	lines := []string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	started := map[string]int{}
	for i, l := range lines {
		if name, ok := strings.CutPrefix(l, "=== RUN   "); ok && !strings.Contains(name, "/") {
			started[name] = i
		}
		m := testLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		secs, _ := strconv.ParseFloat(m[3], 64)
		r := argosuite.Result{Outcome: strings.ToLower(m[1]), Seconds: secs}
		if r.Outcome != "pass" {
			r.Message = testMessage(lines[started[m[2]]:i])
		}
		got[m[2]] = r
	}
	if len(got) == 0 {
		return nil, fmt.Errorf("the test binary reported no test:\n%s", tailLines(lines, 40))
	}
	return got, nil
}

// testMessage is what a test said of its failure or skip: testify's Error
// line and the one after it, else the last file.go:N: line it logged.
func testMessage(lines []string) string {
	msg := ""
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if rest, ok := strings.CutPrefix(t, "Error:"); ok {
			msg = strings.TrimSpace(rest)
			if i+1 < len(lines) {
				if next := strings.TrimSpace(lines[i+1]); next != "" && !strings.Contains(next, ":") || strings.HasPrefix(next, "Error") {
					msg += " " + next
				}
			}
			break
		}
		if strings.HasPrefix(l, "    ") && goLogLine.MatchString(t) {
			msg = t
		}
	}
	if len(msg) > 400 {
		msg = msg[:400] + "…"
	}
	return msg
}

// goLogLine is a test's log line: file.go:N: message.
var goLogLine = regexp.MustCompile(`^[a-z_]+\.go:[0-9]+: `)

func tailLines(lines []string, n int) string {
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
