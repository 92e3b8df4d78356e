package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestParseResultsReadsVerdictsAndWhy(t *testing.T) {
	out := `=== RUN   TestA
time="x" level=info msg="noise"
--- PASS: TestA (1.25s)
=== RUN   TestB
    custom_tool_test.go:30: 
        	Error Trace:	fixture/util.go:38
        	Error:      	Received unexpected error:
        	            	exit status 1
        	Test:       	TestB
--- FAIL: TestB (2.50s)
=== RUN   TestC
    custom_tool_test.go:7: skipping: no ssh
--- SKIP: TestC (0.00s)
=== RUN   TestD
=== RUN   TestD/sub
    --- FAIL: TestD/sub (0.10s)
--- FAIL: TestD (0.20s)
FAIL
`
	got, err := parseResults(out)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		outcome, msg string
		secs         float64
	}{
		"TestA": {"pass", "", 1.25},
		"TestB": {"fail", "Received unexpected error: exit status 1", 2.5},
		"TestC": {"skip", "custom_tool_test.go:7: skipping: no ssh", 0},
		"TestD": {"fail", "", 0.2},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d results: %+v", len(got), got)
	}
	for name, w := range want {
		r := got[name]
		if r.Outcome != w.outcome || r.Message != w.msg || r.Seconds != w.secs {
			t.Errorf("%s: %+v, want %+v", name, r, w)
		}
	}
	if _, err := parseResults("panic: no kube config\n"); err == nil {
		t.Error("output without a verdict was read as results")
	}
}

func TestPluginTestsAreThoseStartingAPluginServer(t *testing.T) {
	dir := t.TempDir()
	src := `package e2e

import "testing"

func TestUses(t *testing.T) { Given(t).RunningCMPServer("./testdata/x").When() }
func TestNested(t *testing.T) { func() { ctx.RunningCMPServer("d") }() }
func TestOther(t *testing.T) { Given(t).Path("guestbook") }
func helper(t *testing.T) { Given(t).RunningCMPServer("./testdata/x") }
`
	if err := os.WriteFile(filepath.Join(dir, "a_test.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := pluginTests(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range got {
		names = append(names, g.name+"@"+g.file)
	}
	if want := []string{"TestUses@a_test.go", "TestNested@a_test.go"}; !slices.Equal(names, want) {
		t.Errorf("got %v, want %v", names, want)
	}
	if _, err := pluginTests(t.TempDir()); err == nil {
		t.Error("a package without plugin tests was accepted")
	}
}
