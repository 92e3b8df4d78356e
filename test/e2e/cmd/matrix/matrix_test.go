package main

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The committed documents are what render makes of the committed results: a
// hand edit of either table, or of README's block, fails here.
func TestDocumentsAreGenerated(t *testing.T) {
	root := filepath.Join("..", "..", "..", "..")
	res, err := loadResults(filepath.Join(root, "docs", "compatibility.json"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "compatibility.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The documents speak for what hack/versions.sh plans now: a pin changed
	// without a -render would leave them naming the old plan.
	pins, err := readPins(root)
	if err != nil {
		t.Fatal(err)
	}
	if k, a := fields(pins["MATRIX_KUBE"]), plannedArgo(pins, res, false); !slices.Equal(k, res.PlannedKube) || !slices.Equal(a, res.PlannedArgo) {
		t.Errorf("docs/compatibility.json plans Kubernetes %v and Argo CD %v, hack/versions.sh %v and %v: run go run ./test/e2e/cmd/matrix -render",
			res.PlannedKube, res.PlannedArgo, k, a)
	}
	page, err := renderPage(root, res)
	if err != nil {
		t.Fatal(err)
	}
	if string(doc) != page {
		t.Error("docs/compatibility.md is not what docs/compatibility.json renders to: run go run ./test/e2e/cmd/matrix -render")
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := replaceBlock(string(readme), renderReadme(res))
	if err != nil {
		t.Fatal(err)
	}
	if string(readme) != want {
		t.Error("README's compatibility block is not what docs/compatibility.json renders to: run go run ./test/e2e/cmd/matrix -render")
	}
}

func TestScenariosFromGoTestJSON(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Test":"TestA"}`,
		`{"Action":"output","Test":"TestA","Output":"    a_test.go:10: helm install took 2s\n"}`,
		`{"Action":"pass","Test":"TestA","Elapsed":3.5}`,
		`{"Action":"run","Test":"TestB"}`,
		`{"Action":"output","Test":"TestB/sub","Output":"    b_test.go:20: first log\n"}`,
		`{"Action":"output","Test":"TestB/sub","Output":"    b_test.go:21: pod was denied: not_repo_server\n"}`,
		`{"Action":"output","Test":"TestB/sub","Output":"--- FAIL: TestB/sub (1.00s)\n"}`,
		`{"Action":"fail","Test":"TestB/sub","Elapsed":1}`,
		`{"Action":"output","Test":"TestB/other","Output":"    b_test.go:30: a passing sibling's log\n"}`,
		`{"Action":"pass","Test":"TestB/other","Elapsed":0.5}`,
		`{"Action":"output","Test":"TestB","Output":"    b_test.go:40: the parent's own log\n"}`,
		`{"Action":"fail","Test":"TestB","Elapsed":2}`,
		`{"Action":"run","Test":"TestD"}`,
		`{"Action":"output","Test":"TestD","Output":"    d_test.go:5: no subtests\n"}`,
		`{"Action":"fail","Test":"TestD","Elapsed":1}`,
		`not json`,
		`{"Action":"skip","Test":"TestC","Elapsed":0}`,
		`{"Action":"fail","Elapsed":9}`,
	}, "\n")
	got := scenarios(strings.NewReader(in))
	want := []Scenario{
		{Name: "TestA", Result: "pass", Seconds: 3.5},
		{Name: "TestB", Result: "fail", Seconds: 2, Reason: "sub: b_test.go:21: pod was denied: not_repo_server"},
		{Name: "TestD", Result: "fail", Seconds: 1, Reason: "d_test.go:5: no subtests"},
		{Name: "TestC", Result: "skip"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("scenario %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestSummaryGroupsReleases(t *testing.T) {
	rows := []Row{
		{Version: "v1.37.2", Build: "ok", Scenarios: []Scenario{{Name: "TestA", Result: "pass"}}},
		{Version: "v1.30.14", Build: "cached", Scenarios: []Scenario{{Name: "TestA", Result: "fail"}, {Name: "TestB", Result: "pass"}}},
		{Version: "v1.27.16", Build: "failed", BuildReason: "undefined: x"},
	}
	got := summary(rows, []string{"v1.37.2", "v1.36.5", "v1.30.14", "v1.27.16"})
	want := "every scenario passes on v1.37.2; fails on v1.30.14 (TestA); cannot be built here: v1.27.16; not run yet: v1.36.5"
	if got != want {
		t.Errorf("summary:\n got %s\nwant %s", got, want)
	}
	if summary(nil, []string{"v1.37.2"}) != "not run yet" {
		t.Errorf("summary of nothing: %q", summary(nil, nil))
	}
}

func TestRowsSortNewestFirst(t *testing.T) {
	rows := []Row{{Version: "v1.9.0"}, {Version: "v1.37.2"}, {Version: "v1.10.1"}}
	sortRows(rows)
	if rows[0].Version != "v1.37.2" || rows[1].Version != "v1.10.1" || rows[2].Version != "v1.9.0" {
		t.Errorf("order: %v", rows)
	}
}

func TestBuildFailureLine(t *testing.T) {
	out := "tools: building x\ngo: downloading a v1\n# k8s.io/foo\n../x.go:3:2: undefined: Bar\nexit status 1\n"
	if got := buildFailure(out, nil); got != "../x.go:3:2: undefined: Bar" {
		t.Errorf("got %q", got)
	}
}

func TestDocumentsShowThePlan(t *testing.T) {
	r := &Results{
		Kube:        []Row{{Version: "v1.37.2", Build: "ok", Scenarios: []Scenario{{Name: "TestA", Result: "pass"}}}},
		Argo:        []Row{{Version: "v2.10.18", Build: "failed", BuildReason: "not verified"}, {Version: "v2.10.12", Build: "ok", Scenarios: []Scenario{{Name: "TestA", Result: "pass"}}}},
		PlannedKube: []string{"v1.37.2", "v1.36.5"},
		PlannedArgo: []string{"v2.10.12"},
	}
	doc := renderDoc(r)
	if strings.Contains(doc, "v2.10.18") {
		t.Errorf("a release no longer planned is in the document:\n%s", doc)
	}
	if !strings.Contains(doc, "Not run yet: v1.36.5.") {
		t.Errorf("the planned release without a row is not named:\n%s", doc)
	}
}

// Each release gets its own binaries: a pin its pinned tools, another release
// the matrix build, and the suite is pointed at the same kube-apiserver.
func TestPlanPicksEachReleasesTools(t *testing.T) {
	pins := map[string]string{"KUBE_VERSION": "v1.37.2", "KUBE_PREV_VERSION": "v1.32.13", "ARGOCD_VERSION": "v3.6.1", "ARGOCD_V2_VERSION": "v2.12.13"}
	o := options{axes: "kubernetes,argocd", logDir: "/logs", kube: []string{"v1.37.2", "v1.32.13", "v1.33.13", "v1.28.15+SidecarContainers=true+InPlacePodVerticalScaling=true"}, argo: []string{"v3.6.1", "v2.10.12"}}
	want := []struct{ tool, env string }{
		{"kube-controller-manager", "E2E_KUBE_APISERVER=kube-apiserver"},
		{"kube-controller-manager-1.32", "E2E_KUBE_APISERVER=kube-apiserver-1.32"},
		{"kube@v1.33.13", "E2E_KUBE_APISERVER=kube-apiserver-1.33"},
		// A cell with feature gates: the release's tools, the gates to its
		// kube-apiserver.
		{"kube@v1.28.15", "E2E_KUBE_APISERVER_ARGS=--feature-gates=SidecarContainers=true,InPlacePodVerticalScaling=true"},
		{"repoclient", "E2E_ARGOCD=argocd:repoclient"},
		{"argocd@v2.10.12", "E2E_ARGOCD=argocd-2.10:repoclient-2.10"},
	}
	steps := plan(o, pins)
	if len(steps) != len(want) {
		t.Fatalf("%d steps, want %d", len(steps), len(want))
	}
	for i, st := range steps {
		tools, env := st.axis.tools(st.version)
		if !contains(tools, want[i].tool) || !contains(env, want[i].env) {
			t.Errorf("%s %s: tools %v, env %v; want %s and %s", st.axis.name, st.version, tools, env, want[i].tool, want[i].env)
		}
		// The whole suite, as make e2e runs it: the Vault tests too.
		if st.axis.name == "kubernetes" && (!contains(tools, "vault") || !contains(env, vaultEnv)) {
			t.Errorf("kubernetes %s: tools %v, env %v; want vault and %s", st.version, tools, env, vaultEnv)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Argo CD releases before v2.12 get the cipher setting they need to start on
// this Go; later ones run with Argo's own default.
func TestOldArgoGetsCiphersGoStillLists(t *testing.T) {
	for v, want := range map[string]bool{"v2.10.12": true, "v2.11.7": true, "v2.12.13": false, "v2.14.21": false, "v3.0.23": false} {
		env := goCipherEnv(v)
		if got := len(env) == 1 && strings.HasPrefix(env[0], "ARGOCD_TLS_CIPHERS="); got != want {
			t.Errorf("%s: env %v, want the cipher setting: %v", v, env, want)
		}
		for _, e := range env {
			for _, name := range strings.Split(strings.TrimPrefix(e, "ARGOCD_TLS_CIPHERS="), ":") {
				if !goLists(name) {
					t.Errorf("%s: %s is not in crypto/tls.CipherSuites()", v, name)
				}
			}
		}
	}
}

func goLists(name string) bool {
	for _, s := range tls.CipherSuites() {
		if s.Name == name {
			return true
		}
	}
	return false
}

// A Kubernetes row installs what make e2e installs, or a test that needs a
// tool the row did not build fails there for the wrong reason.
func TestSuiteToolsAreTheMakefiles(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^E2E_TOOLS :=((?:[^\n]*\\\n)*[^\n]*)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no E2E_TOOLS in the Makefile")
	}
	var want []string
	for _, f := range strings.Fields(strings.ReplaceAll(string(m[1]), "\\", " ")) {
		if !strings.HasPrefix(f, "$(") {
			want = append(want, f)
		}
	}
	got := append([]string{}, suiteTools...)
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("the matrix's suite tools %v, the Makefile's E2E_TOOLS %v", got, want)
	}
}

// A release of MATRIX_ARGOCD_SOURCE is built from the git repository given
// with -argocd-source (hack/tools.sh's ARGOCD_SOURCE), and the documents say so.
func TestReleasesBuiltFromSource(t *testing.T) {
	pins := map[string]string{"KUBE_VERSION": "v1.37.2", "ARGOCD_VERSION": "v3.6.1", "MATRIX_ARGOCD_SOURCE": "v3.5.1 v3.4.7"}
	o := options{axes: "argocd", argo: []string{"v3.6.1", "v3.5.1"}}
	for _, st := range plan(o, pins) {
		if st.source != "" {
			t.Errorf("without -argocd-source, %s is built from %q", st.version, st.source)
		}
	}
	o.argoSource = "/snap/argo-cd.git"
	steps := plan(o, pins)
	if len(steps) != 2 || steps[0].source != "" || steps[1].source != o.argoSource {
		t.Fatalf("steps %+v: want v3.5.1 alone from source", steps)
	}
	if tools, env := steps[1].axis.tools("v3.5.1"); !contains(tools, "argocd@v3.5.1") || !contains(env, "E2E_ARGOCD=argocd-3.5:repoclient-3.5") {
		t.Errorf("v3.5.1: tools %v, env %v", tools, env)
	}
	r := &Results{Argo: []Row{{Version: "v3.5.1", Build: "ok", BuildSeconds: 600, Source: "tag v3.5.1 of the argo-cd repository",
		Scenarios: []Scenario{{Name: "TestRealChain", Result: "pass"}}}}, PlannedArgo: []string{"v3.5.1"}}
	doc := renderDoc(r)
	for _, want := range []string{"| source, 10m", "Argo CD v3.5.1 is built from source (tag v3.5.1 of the argo-cd repository", "not part of CI"} {
		if !strings.Contains(doc, want) {
			t.Errorf("the document lacks %q:\n%s", want, doc)
		}
	}
	if got := summary(r.Argo, r.PlannedArgo); got != "every scenario passes on v3.5.1 (built from source)" {
		t.Errorf("summary %q", got)
	}
}
