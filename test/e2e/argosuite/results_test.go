package argosuite

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestRegressionsAndRender(t *testing.T) {
	r := &Results{Commit: "0123456789abcdef", Argo: "v3.6.1", Kube: "v1.37.2", Servers: []string{"argo", "ours"},
		Tests: []Test{
			{Name: "TestB", File: "b_test.go", Results: map[string]Result{"argo": {Outcome: "pass", Seconds: 1}, "ours": {Outcome: "fail", Seconds: 2}}},
			{Name: "TestA", File: "a_test.go", Results: map[string]Result{"argo": {Outcome: "pass", Seconds: 1.25}, "ours": {Outcome: "pass", Seconds: 1}}},
			{Name: "TestC", File: "a_test.go", Why: "needs a kubelet", Results: map[string]Result{"argo": {Outcome: "fail"}, "ours": {Outcome: "fail"}}},
		}}
	if got := r.Regressions(); !slices.Equal(got, []string{"TestB"}) {
		t.Errorf("regressions %v", got)
	}
	doc := r.Render()
	for _, want := range []string{
		"| `TestA` (a_test.go) | pass 1.2 s | pass 1.0 s |\n| `TestC` (a_test.go) | fail 0.0 s | fail 0.0 s |\n| `TestB` (b_test.go) | pass 1.0 s | fail 2.0 s |",
		"commit `0123456789ab`", "- `TestC`: needs a kubelet",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("the section lacks %q:\n%s", want, doc)
		}
	}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := r.Save(path); err != nil {
		t.Fatal(err)
	}
	back, err := Load(path)
	if err != nil || back.Render() != doc {
		t.Errorf("a saved file renders differently: %v", err)
	}
}
