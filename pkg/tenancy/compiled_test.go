package tenancy

import (
	"fmt"
	"testing"
)

// The cache answers as compileGlob does, keeps what it compiled, refuses
// what does not compile without keeping it, and stays within its bound.
func TestCompiledGlobs(t *testing.T) {
	var c compiledGlobs
	re, err := c.get("team-*")
	if err != nil || !re.MatchString("team-a") || re.MatchString("team-a/b") {
		t.Fatalf("team-*: %v, %v", re, err)
	}
	if again, _ := c.get("team-*"); again != re {
		t.Error("a second get compiled the pattern again")
	}
	if _, err := c.get("a["); err == nil || len(c.m) != 1 {
		t.Errorf("a[: err %v, %d kept", err, len(c.m))
	}
	for i := range maxCompiledGlobs + 10 {
		if _, err := c.get(fmt.Sprintf("p%d-*", i)); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.m) > maxCompiledGlobs {
		t.Errorf("%d patterns kept, bound %d", len(c.m), maxCompiledGlobs)
	}
}

// What Decide costs per request (go test -run '^$' -bench Decide ./pkg/tenancy/).
func BenchmarkDecide(b *testing.B) {
	r := Rules{AllowedProjects: []string{"team-a", "team-*"},
		AllowedSourceRepos: []string{"https://github.com/org/team-a-*", "https://github.com/org/**", "!https://github.com/org/secret"}}
	req := Request{Call: Generate, Projects: []string{"team-a"}, Repos: []string{"https://github.com/org/team-a-app.git"}}
	b.ReportAllocs()
	for b.Loop() {
		if !Decide(r, req).Allowed() {
			b.Fatal("refused")
		}
	}
}
