// Package golden compares what a test produced with a file under its
// testdata, the golden file, and rewrites the file instead when the test
// binary runs with -update. Every suite with golden files uses it, so there is
// one -update flag and one way a golden fails: a missing one says how to write
// it, a stale one shows where it differs. Paths are the suite's own, a file per
// case or a directory per case alike.
package golden

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files with what the tests produce")

// Update reports whether this run rewrites golden files (-update), for a
// suite that also removes the goldens of cases that are gone.
func Update() bool { return *update }

// Check fails t when the file at path does not hold exactly got; with
// -update it writes got there, making its directory.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		write(t, path, got)
		return
	}
	want, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s does not exist: %s writes it", path, rerun(t))
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s is stale (%s rewrites it; review the diff):\n%s", path, rerun(t), Diff(string(want), string(got)))
	}
}

// CheckOptional is Check for an output that may be empty: then there must be
// no file at path, and -update removes it.
func CheckOptional(t testing.TB, path string, got []byte) {
	t.Helper()
	if len(got) > 0 {
		Check(t, path, got)
		return
	}
	_, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case *update:
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		t.Logf("removed %s", path)
	default:
		t.Errorf("%s should not exist, the output is empty (%s removes it)", path, rerun(t))
	}
}

func write(t testing.TB, path string, got []byte) {
	t.Helper()
	// An unchanged golden is left alone, so -update touches only what it
	// says it rewrote.
	if want, err := os.ReadFile(path); err == nil && bytes.Equal(want, got) {
		return
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, got, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("rewrote %s", path)
}

// rerun is the command that rewrites t's goldens: its package, as a path from
// the module root when one is found, and its top-level test.
func rerun(t testing.TB) string {
	name, _, _ := strings.Cut(t.Name(), "/")
	return fmt.Sprintf("go test %s -run '^%s$' -update", packageDir(), name)
}

// packageDir is the test's package directory (go test runs in it) relative to
// the module root, "." when there is none above it.
func packageDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			rel, err := filepath.Rel(dir, wd)
			if err != nil || rel == "." {
				return "."
			}
			return "./" + filepath.ToSlash(rel) + "/"
		}
		if filepath.Dir(dir) == dir {
			return "."
		}
	}
}

// diffLines and contextLines bound how much of each side, and of what is
// around the change, Diff shows.
const (
	diffLines    = 20
	contextLines = 3
)

// Diff shows where want and got part: a few lines before the first
// difference, the lines of want (-) and of got (+) from the first to the last
// difference, quoted so that whitespace shows, and a few lines after.
func Diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	pre := 0
	for pre < len(w) && pre < len(g) && w[pre] == g[pre] {
		pre++
	}
	suf := 0
	for suf < len(w)-pre && suf < len(g)-pre && w[len(w)-1-suf] == g[len(g)-1-suf] {
		suf++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "first difference at line %d (- want, + got):\n", pre+1)
	for i := max(0, pre-contextLines); i < pre; i++ {
		fmt.Fprintf(&b, "  %5d  %s\n", i+1, w[i])
	}
	side := func(mark string, lines []string) {
		for i, l := range lines {
			if i == diffLines {
				fmt.Fprintf(&b, "%s        ... %d more\n", mark, len(lines)-i)
				break
			}
			fmt.Fprintf(&b, "%s %5d  %q\n", mark, pre+i+1, l)
		}
	}
	side("-", w[pre:len(w)-suf])
	side("+", g[pre:len(g)-suf])
	for i := len(w) - suf; i < min(len(w), len(w)-suf+contextLines); i++ {
		fmt.Fprintf(&b, "  %5d  %s\n", i+1, w[i])
	}
	return b.String()
}
