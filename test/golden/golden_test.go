package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps what a check says instead of failing.
type recorder struct {
	testing.TB
	errs, logs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

func check(t *testing.T, fn func(testing.TB, string, []byte), path, got string, updating bool) *recorder {
	t.Helper()
	old := *update
	*update = updating
	defer func() { *update = old }()
	r := &recorder{TB: t}
	fn(r, path, []byte(got))
	return r
}

func read(t *testing.T, path string) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "case", "out.yaml")

	r := check(t, Check, path, "a: 1\n", false)
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], path+" does not exist: go test ./test/golden/ -run '^TestCheck$' -update writes it") {
		t.Errorf("a missing golden: %q", r.errs)
	}

	r = check(t, Check, path, "a: 1\nb: 2\n", true)
	if got, ok := read(t, path); len(r.errs) != 0 || !ok || got != "a: 1\nb: 2\n" {
		t.Errorf("-update in a missing directory wrote %q (%v), errors %q", got, ok, r.errs)
	}
	if r := check(t, Check, path, "a: 1\nb: 2\n", false); len(r.errs) != 0 {
		t.Errorf("an equal golden: %q", r.errs)
	}
	if r := check(t, Check, path, "a: 1\nb: 2\n", true); len(r.logs) != 0 {
		t.Errorf("-update rewrote an equal golden: %q", r.logs)
	}

	r = check(t, Check, path, "a: 1\nb: 3\n", false)
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], path+" is stale (go test ./test/golden/ -run '^TestCheck$' -update rewrites it") ||
		!strings.Contains(r.errs[0], "first difference at line 2 (- want, + got):\n      1  a: 1\n-     2  \"b: 2\"\n+     2  \"b: 3\"\n") {
		t.Errorf("a stale golden: %q", r.errs)
	}
	if got, _ := read(t, path); got != "a: 1\nb: 2\n" {
		t.Errorf("a check without -update wrote %q", got)
	}
}

func TestCheckOptional(t *testing.T) {
	path := filepath.Join(t.TempDir(), "workload.yaml")
	if r := check(t, CheckOptional, path, "", false); len(r.errs) != 0 {
		t.Errorf("no output, no golden: %q", r.errs)
	}
	if r := check(t, CheckOptional, path, "x\n", false); len(r.errs) != 1 || !strings.Contains(r.errs[0], "does not exist") {
		t.Errorf("output without a golden: %q", r.errs)
	}
	check(t, CheckOptional, path, "x\n", true)
	if r := check(t, CheckOptional, path, "", false); len(r.errs) != 1 || !strings.Contains(r.errs[0], path+" should not exist, the output is empty") {
		t.Errorf("a golden for no output: %q", r.errs)
	}
	check(t, CheckOptional, path, "", true)
	if _, ok := read(t, path); ok {
		t.Error("-update left the golden of an empty output")
	}
}

func TestDiff(t *testing.T) {
	want := strings.Repeat("same\n", 10) + "old\n" + strings.Repeat("tail\n", 10)
	got := strings.Repeat("same\n", 10) + "new\nadded\n" + strings.Repeat("tail\n", 10)
	d := Diff(want, got)
	wantDiff := "first difference at line 11 (- want, + got):\n" +
		"      8  same\n      9  same\n     10  same\n" +
		"-    11  \"old\"\n" +
		"+    11  \"new\"\n+    12  \"added\"\n" +
		"     12  tail\n     13  tail\n     14  tail\n"
	if d != wantDiff {
		t.Errorf("diff:\n%s\nwant:\n%s", d, wantDiff)
	}
	long := Diff("", strings.Repeat("x\n", 30))
	if !strings.Contains(long, "+    20  \"x\"\n+        ... 10 more\n") {
		t.Errorf("a long change is not cut short:\n%s", long)
	}
}
