package askpass

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// Env makes git's askpass program, which the repo-server names "argocd"
// (GIT_ASKPASS=argocd, looked up on PATH, which in a plugin image seldom holds
// Argo CD's binary), this plugin server. With binDir (LinkDir's directory,
// where "argocd" is a link to the server) it puts binDir first on PATH and
// leaves GIT_ASKPASS as Argo CD set it: a plugin sees the environment it
// would see under argocd-cmp-server (Argo CD's own plugin tests check it).
// Without binDir, or when env has no PATH to extend, GIT_ASKPASS is pointed
// at self instead. Every other entry is kept; the last entry of a name wins,
// as in the process env.
func Env(env []string, self, binDir string) []string {
	asked := -1
	for i := len(env) - 1; i >= 0; i-- {
		if name, _, _ := strings.Cut(env[i], "="); name == keys.EnvGitAskPass {
			if env[i] == keys.EnvGitAskPass+"="+keys.GitAskPassArgoCD {
				asked = i
			}
			break
		}
	}
	if asked < 0 {
		return env
	}
	out := append([]string{}, env...)
	if binDir != "" {
		for i := len(out) - 1; i >= 0; i-- {
			if path, ok := strings.CutPrefix(out[i], "PATH="); ok {
				out[i] = "PATH=" + binDir
				if path != "" {
					out[i] += string(os.PathListSeparator) + path
				}
				return out
			}
		}
	}
	if self == "" {
		return env
	}
	out[asked] = keys.EnvGitAskPass + "=" + self
	return out
}

// LinkDir makes dir/argocd a link to self, for Env's binDir: git then finds
// the plugin server under Argo CD's name. dir is private to the server
// (beside its work dir), so no plugin's command can replace the link but its
// own request's, which could as well set GIT_ASKPASS itself.
func LinkDir(dir, self string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("askpass link dir: %w", err)
	}
	link := filepath.Join(dir, keys.GitAskPassArgoCD)
	_ = os.Remove(link)
	if err := os.Symlink(self, link); err != nil {
		return fmt.Errorf("askpass link: %w", err)
	}
	return nil
}
