package inject

import (
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
)

// IsRepoServer reports whether pod runs Argo CD's repo-server as cat
// recognises it: the rule the webhook injects by, exported so that the
// reconciler's cache keeps exactly the pods the webhook would inject and no
// second rule can drift from this one.
func IsRepoServer(pod *corev1.Pod, cat *catalog.Catalog) bool {
	return repoServerIndex(pod, cat) >= 0
}

// SameRepoServerRule reports whether a and b recognise the same pods as
// repo-servers (nil recognises none): a cache filled by a's rule stays right
// under b. It reads what repoServerIndex reads, and only that.
func SameRepoServerRule(a, b *catalog.Catalog) bool {
	if a == nil || b == nil {
		return a == b
	}
	return slices.Equal(a.Defaults.RepoServerNames, b.Defaults.RepoServerNames) &&
		slices.Equal(a.Defaults.RepoServerPrograms, b.Defaults.RepoServerPrograms)
}

// repoServerIndex is the index in pod.Spec.Containers of Argo CD's
// repo-server container, or -1 when the pod has none. A container is the
// repo-server when its name is one of the catalog's names, else when its
// program is one of the catalog's programs: names first, so a pod whose own
// helper also runs the repo-server binary gets the mount where the install
// path put the repo-server.
//
// Nothing here is a trust decision: a pod recognised wrongly is only a pod its
// author opted in (the label) being injected or skipped; what the injector
// owns is checked against the catalog either way.
func repoServerIndex(pod *corev1.Pod, cat *catalog.Catalog) int {
	for i, c := range pod.Spec.Containers {
		if slices.Contains(cat.Defaults.RepoServerNames, c.Name) {
			return i
		}
	}
	if len(cat.Defaults.RepoServerPrograms) == 0 {
		return -1
	}
	for i, c := range pod.Spec.Containers {
		if p := program(c); p != "" && slices.Contains(cat.Defaults.RepoServerPrograms, p) {
			return i
		}
	}
	return -1
}

// entrypointWrappers run the program named after them (and their own flags):
// Argo CD's image starts its binaries through tini and entrypoint.sh, the
// operator through uid_entrypoint.sh.
var entrypointWrappers = map[string]bool{
	"tini": true, "tini-static": true, "dumb-init": true, "entrypoint.sh": true, "uid_entrypoint.sh": true, "exec": true,
}

// shells run their -c script; its first word is the program.
var shells = map[string]bool{"sh": true, "bash": true, "ash": true, "dash": true}

// maxUnwrap bounds how many wrappers and shells program looks through.
const maxUnwrap = 8

// program is the base name of the executable a container runs, looking
// through entrypoint wrappers and sh -c, from its command then args (an image
// whose entrypoint is a wrapper is given the program in args, as Argo CD's
// manifests and argo-helm do). It is only the first word: an argocd-server
// container whose args name the repo-server's address is not a repo-server.
// Empty when the container names no command (the image's own entrypoint,
// which the API server does not know).
func program(c corev1.Container) string {
	words := append(append([]string{}, c.Command...), c.Args...)
	for range maxUnwrap {
		if len(words) == 0 {
			return ""
		}
		base := path.Base(words[0])
		switch {
		case entrypointWrappers[base]:
			words = words[1:]
			for len(words) > 0 && strings.HasPrefix(words[0], "-") {
				words = words[1:]
			}
		case shells[base]:
			words = words[1:]
			for len(words) > 0 && strings.HasPrefix(words[0], "-") {
				flag := words[0]
				words = words[1:]
				if strings.Contains(flag, "c") && len(words) > 0 {
					// The script's words, then what follows it ($0, $1…).
					words = append(strings.Fields(words[0]), words[1:]...)
					break
				}
			}
		case base == "/" || base == ".":
			return "" // "/" or an empty word names no program
		default:
			return base
		}
	}
	return ""
}
