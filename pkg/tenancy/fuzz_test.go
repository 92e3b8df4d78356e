package tenancy

import (
	"strings"
	"testing"
)

// What validation accepts, Decide can use: a repository pattern without
// problems compiles as Decide compiles it (normalised), and no pattern or
// text makes matching panic.
func FuzzGlob(f *testing.F) {
	for _, seed := range []string{"*", "**", "a/*/b", "team-[a-c]", "{a,b{c,d}}", `a\*`, "[!x]", "a[", "{", "}", "]", `\`, "[Z-a]", "!x"} {
		f.Add(seed, "https://github.com/org/repo")
	}
	f.Fuzz(func(t *testing.T, pat, text string) {
		problems := Rules{AllowedSourceRepos: []string{pat}}.Validate()
		if _, err := compileGlob(normalizeRepoPattern(strings.TrimPrefix(pat, "!"))); err != nil && len(problems) == 0 {
			t.Fatalf("%q passes validation but does not compile as Decide compiles it: %v", pat, err)
		}
		_ = Decide(Rules{AllowedSourceRepos: []string{pat, "*"}}, Request{Call: Generate, Repos: []string{text}})
	})
}
