package command

import "testing"

// The expected texts are written out by hand from argocd-cmp-server's
// runCommand (v3.6.1): users paste these messages into search engines, so
// ours must start with exactly Argo CD's text (cmpserver/errtext_test.go
// checks whole messages).

func TestFormatArgvLikeArgo(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"kustomize", "build", "."}, `kustomize build .`},
		// Only arguments containing white space are quoted, Go-style.
		{[]string{"sh", "-c", `echo "x"`}, `sh -c "echo \"x\""`},
		{[]string{"sh", "-c", "set -e\nhelm template .\n"}, `sh -c "set -e\nhelm template .\n"`},
		// strconv.Quote escapes what is not printable, such as a no-break space.
		{[]string{"a\tb", "c\u00a0d"}, `"a\tb" "c\u00a0d"`},
		// An empty argument is shown as "", and quotes, $ or globs alone are not quoted.
		{[]string{"printf", "", "it's", "$HOME", "*.yaml", `"q"`}, `printf "" it's $HOME *.yaml "q"`},
	} {
		if got := formatArgv(tc.argv); got != tc.want {
			t.Errorf("formatArgv(%q) = %s, want %s", tc.argv, got, tc.want)
		}
	}
}
