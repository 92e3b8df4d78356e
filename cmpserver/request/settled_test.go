package request

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/cmp-injector/cmp-injector/cmpserver/command"
	"github.com/cmp-injector/cmp-injector/cmpserver/engine"
	"github.com/cmp-injector/cmp-injector/cmpserver/unpack"
	"github.com/cmp-injector/cmp-injector/cmpserver/unpack/tartest"
	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
)

// discoveryEngine serves a plugin whose discovery rule is rule (a line of
// YAML under discover:).
func discoveryEngine(t *testing.T, rule string) *engine.Engine {
	t.Helper()
	p, _, err := pluginconfig.Parse([]byte("kind: ConfigManagementPlugin\nmetadata: {name: d}\nspec:\n  discover:\n    " + rule + "\n  generate: {command: [\"true\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	return engine.New(p, unpack.DefaultLimits(), t.TempDir(), command.DefaultOptions(), os.Environ(), zap.NewNop(),
		command.ObserverFunc(func(command.Report) {}))
}

// match runs a MatchRepository of app on tgz: names only (as the server
// runs a rule by fileName or find.glob, settling early) or on the whole tree.
func match(t *testing.T, e *engine.Engine, tgz []byte, app string, namesOnly bool) (matched, settled bool, files int, err error) {
	t.Helper()
	r := &Request{Engine: e, Extract: true, NamesOnly: namesOnly, Limits: unpack.DefaultLimits(), Log: zap.NewNop()}
	matched, _, err = Run(context.Background(), r, tartest.NewStream(tgz, app), e.Match)
	if r.repo != nil {
		settled, files = r.repo.Settled, r.repo.Files
	}
	return matched, settled, files, err
}

// A names-only discovery stops unpacking once its rule matches the tree so
// far, and answers as the whole tree would; a rule that has not matched, or a
// tree that has a symlink before the match, is unpacked to its end.
func TestSettledMatchAnswersAsTheWholeTree(t *testing.T) {
	filler := make([]tartest.Entry, 0, 100)
	for i := range 100 {
		filler = append(filler, tartest.File(fmt.Sprintf("zdocs/d%03d.md", i), strings.Repeat("x", 1000)))
	}
	repo := func(first ...tartest.Entry) []tartest.Entry { return append(first, filler...) }
	for _, tc := range []struct {
		name, rule, app string
		entries         []tartest.Entry
		want, settled   bool
		unpacked        int // entries unpacked when settled (0: not checked)
	}{
		{"fileName, the app's file first", "fileName: ./kustomization.yaml", "apps/a",
			repo(tartest.Dir("apps"), tartest.Dir("apps/a"), tartest.File("apps/a/kustomization.yaml", "k")), true, true, 3},
		{"fileName, another app's file only", "fileName: ./kustomization.yaml", "apps/b",
			repo(tartest.Dir("apps"), tartest.File("apps/a/kustomization.yaml", "k"), tartest.File("apps/b/x.yaml", "x")), false, false, 0},
		{"fileName, a match in the stream's last entry", "fileName: ./kustomization.yaml", "zz",
			append(repo(tartest.Dir("apps")), tartest.File("zz/kustomization.yaml", "k")), true, true, 102},
		{"fileName glob", "fileName: '*.yaml'", "apps/a",
			repo(tartest.File("apps/a/x.yml", ""), tartest.File("apps/a/z.yaml", "")), true, true, 0},
		{"fileName, a directory matches", "fileName: templates", "apps/a",
			repo(tartest.Dir("apps/a"), tartest.Dir("apps/a/templates")), true, true, 0},
		{"fileName through dirs", "fileName: 'charts/*/Chart.yaml'", "apps/a",
			repo(tartest.File("apps/a/charts/web/Chart.yaml", "")), true, true, 0},
		{"fileName up and across", "fileName: ../common/x.yaml", "apps/a",
			repo(tartest.Dir("apps/a"), tartest.File("apps/common/x.yaml", "")), true, true, 0},
		{"a symlink before the match", "fileName: ./kustomization.yaml", "apps/a",
			repo(tartest.Symlink("apps/a/k.yaml", "kustomization.yaml"), tartest.File("apps/a/kustomization.yaml", "")), true, false, 0},
		{"a later duplicate as a dangling link", "fileName: ./kustomization.yaml", "apps/a",
			append(repo(tartest.File("apps/a/kustomization.yaml", "")), tartest.Symlink("apps/a/kustomization.yaml", "gone")), true, true, 0},
		{"find.glob **", "find: {glob: '**/Chart.yaml'}", "apps/a",
			repo(tartest.File("apps/a/charts/x/y/Chart.yaml", "")), true, true, 0},
		{"find.glob braces", "find: {glob: '{a,b}.json'}", "apps/a",
			repo(tartest.File("apps/a/b.json", "")), true, true, 0},
		{"find.glob, nothing", "find: {glob: '**/*.jsonnet'}", "apps/a",
			repo(tartest.File("apps/a/b.json", "")), false, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := discoveryEngine(t, tc.rule)
			tgz := tartest.Tgz(t, tc.entries...)
			whole, _, wholeFiles, err := match(t, e, tgz, tc.app, false)
			if err != nil {
				t.Fatal(err)
			}
			got, settled, files, err := match(t, e, tgz, tc.app, true)
			if err != nil {
				t.Fatal(err)
			}
			if got != whole || got != tc.want {
				t.Errorf("matched %v names-only, %v on the whole tree; want %v", got, whole, tc.want)
			}
			if settled != tc.settled {
				t.Errorf("settled %v, want %v", settled, tc.settled)
			}
			// Not settled: every entry unpacked; settled: fewer, or exactly
			// as many as the case says (a match in the last entry saves none).
			switch {
			case !settled && files != wholeFiles,
				settled && tc.unpacked == 0 && files >= wholeFiles,
				tc.unpacked > 0 && files != tc.unpacked:
				t.Errorf("%d of %d entries unpacked, settled %v", files, wholeFiles, settled)
			}
		})
	}
	// A pattern without wildcards naming nothing fails Argo CD's discovery;
	// it still does, the tree unpacked to its end.
	e := discoveryEngine(t, "find: {glob: missing.yaml}")
	tgz := tartest.Tgz(t, repo(tartest.File("apps/a/b.json", ""))...)
	_, _, _, errWhole := match(t, e, tgz, "apps/a", false)
	if _, settled, _, err := match(t, e, tgz, "apps/a", true); errWhole == nil || err == nil || settled || !strings.HasSuffix(err.Error(), "file does not exist") {
		t.Errorf("names-only: settled %v, %v; whole tree: %v", settled, err, errWhole)
	}
}

// Random trees: whatever the entries' order, a names-only discovery,
// settling or not, answers as the whole tree does.
func TestSettledMatchAgreesOnRandomTrees(t *testing.T) {
	rules := []string{"fileName: ./kustomization.yaml", "fileName: '*.yaml'", "fileName: '*/Chart.yaml'", "fileName: ../b/c.json",
		"find: {glob: '**/Chart.yaml'}", "find: {glob: '*/*.{yaml,json}'}", "find: {glob: '**/x/*.json'}"}
	engines := make([]*engine.Engine, len(rules))
	for i, r := range rules {
		engines[i] = discoveryEngine(t, r)
	}
	dirs := []string{"a", "b", "x", "a/x", "b/x", "a/t", "b/x/t"}
	files := []string{"kustomization.yaml", "Chart.yaml", "c.json", "d.txt"}
	rng := rand.New(rand.NewPCG(40, 1))
	var settledRuns int
	for i := range 300 {
		var entries []tartest.Entry
		for range 1 + rng.IntN(12) {
			d := dirs[rng.IntN(len(dirs))]
			switch rng.IntN(4) {
			case 0:
				entries = append(entries, tartest.Dir(d))
			case 1:
				// A link to a sibling file: inside the repository, dangling or not.
				entries = append(entries, tartest.Symlink(d+"/l"+files[rng.IntN(len(files))], files[rng.IntN(len(files))]))
			default:
				entries = append(entries, tartest.File(d+"/"+files[rng.IntN(len(files))], "y"))
			}
		}
		tgz := tartest.Tgz(t, entries...)
		app := dirs[rng.IntN(len(dirs))]
		r := rng.IntN(len(rules))
		whole, _, _, errWhole := match(t, engines[r], tgz, app, false)
		got, settled, _, err := match(t, engines[r], tgz, app, true)
		if settled {
			settledRuns++
		}
		// (Errors name the request dir, which differs.)
		if got != whole || (err == nil) != (errWhole == nil) {
			t.Fatalf("tree %d, %s in %s: names-only %v, %v (settled %v); whole tree %v, %v; entries %v",
				i, rules[r], app, got, err, settled, whole, errWhole, entries)
		}
	}
	if settledRuns == 0 {
		t.Fatal("no run settled early: the generator does not exercise it")
	}
	t.Logf("%d of 300 settled early", settledRuns)
}
