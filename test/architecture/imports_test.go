package architecture

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/cmp-injector/cmp-injector"

// rule is one row of ARCHITECTURE.md's imports table.
type rule struct {
	pattern string   // a package, or a package and everything under it (/...)
	allowed []string // patterns the package may import
}

// readRules parses the table between its markers: the first column is the
// package, the last the comma-separated patterns it may import.
func readRules(t *testing.T, doc string) []rule {
	t.Helper()
	f, err := os.Open(doc)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var rules []rule
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "<!-- imports table"):
			in = true
			continue
		case strings.HasPrefix(line, "<!-- end of imports table"):
			in = false
			continue
		}
		if !in || !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|---") || strings.HasPrefix(line, "| package ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		r := rule{pattern: unquote(cells[0])}
		for _, a := range strings.Split(cells[len(cells)-1], ",") {
			if a = unquote(a); a != "" {
				r.allowed = append(r.allowed, a)
			}
		}
		rules = append(rules, r)
	}
	if len(rules) == 0 {
		t.Fatalf("%s has no imports table", doc)
	}
	return rules
}

func unquote(s string) string { return strings.Trim(strings.TrimSpace(s), "`") }

func matches(pattern, pkg string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == pattern
}

// ruleFor is the most specific row matching pkg: an exact row, else the
// longest /... pattern.
func ruleFor(rules []rule, pkg string) (rule, bool) {
	var best rule
	found := false
	for _, r := range rules {
		if !matches(r.pattern, pkg) {
			continue
		}
		if r.pattern == pkg {
			return r, true
		}
		if !found || len(r.pattern) > len(best.pattern) {
			best, found = r, true
		}
	}
	return best, found
}

type listed struct {
	ImportPath string
	Imports    []string
}

// TestImportsFollowArchitecture: every package of the module has a row in
// ARCHITECTURE.md, and imports only what its row allows.
func TestImportsFollowArchitecture(t *testing.T) {
	root := filepath.Join("..", "..")
	rules := readRules(t, filepath.Join(root, "ARCHITECTURE.md"))
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	n := 0
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkg := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if pkg == "" || pkg == "test/architecture" {
			continue
		}
		n++
		r, ok := ruleFor(rules, pkg)
		if !ok {
			t.Errorf("%s has no row in ARCHITECTURE.md's imports table", pkg)
			continue
		}
		for _, imp := range p.Imports {
			ours, isOurs := strings.CutPrefix(imp, module+"/")
			if !isOurs {
				continue
			}
			allowed := false
			for _, a := range r.allowed {
				if matches(a, ours) {
					allowed = true
					break
				}
			}
			if !allowed {
				t.Errorf("%s imports %s, which ARCHITECTURE.md (row %s) does not allow", pkg, ours, r.pattern)
			}
		}
	}
	if n < 20 {
		t.Fatalf("checked only %d packages: go list found too little", n)
	}
	t.Logf("%d packages checked against %d rows", n, len(rules))
}

// The checker itself: a forbidden import is found, a pattern matches what
// it should.
func TestRuleMatching(t *testing.T) {
	rules := []rule{
		{pattern: "pkg/inject", allowed: []string{"pkg/catalog", "pkg/keys"}},
		{pattern: "cmpserver/...", allowed: []string{"cmpserver/...", "pkg/keys"}},
		{pattern: "cmpserver/client", allowed: []string{"pkg/keys"}},
	}
	if r, ok := ruleFor(rules, "cmpserver/client"); !ok || r.pattern != "cmpserver/client" {
		t.Errorf("exact row should win: %+v", r)
	}
	if r, ok := ruleFor(rules, "cmpserver/unpack"); !ok || r.pattern != "cmpserver/..." {
		t.Errorf("cmpserver/unpack: %+v %v", r, ok)
	}
	if _, ok := ruleFor(rules, "injector"); ok {
		t.Error("injector has no row")
	}
	if matches("cmpserver/...", "cmpserverx") {
		t.Error("cmpserver/... matched cmpserverx")
	}
	if !matches("cmpserver/...", "cmpserver") {
		t.Error("cmpserver/... should match cmpserver itself")
	}
}
