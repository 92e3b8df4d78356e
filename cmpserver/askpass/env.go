package askpass

import (
	"strings"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// Env points git's askpass program at self (the plugin server's own path)
// where the request asks for Argo CD's (GIT_ASKPASS=argocd, looked up on a
// PATH that seldom holds it); every other entry is kept. The last entry of a
// name wins, as in the process env.
func Env(env []string, self string) []string {
	if self == "" {
		return env
	}
	want := keys.EnvGitAskPass + "=" + keys.GitAskPassArgoCD
	for i := len(env) - 1; i >= 0; i-- {
		if name, _, _ := strings.Cut(env[i], "="); name == keys.EnvGitAskPass {
			if env[i] == want {
				out := append([]string{}, env...)
				out[i] = keys.EnvGitAskPass + "=" + self
				return out
			}
			return env
		}
	}
	return env
}
