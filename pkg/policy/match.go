package policy

import (
	"regexp"
	"strings"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// containerIsRepoServer is true for a container c that makes the pod a
// repo-server, as inject.IsRepoServer decides: a container of the catalog's
// names, else one whose program (through entrypoint wrappers and sh -c) is
// one of its programs. The program is read from the words joined by spaces,
// so a word with spaces in it is read as sh -c's script is.
func (p *program) containerIsRepoServer(c string) string {
	d := p.cat.Defaults
	byName := c + ".name in " + strList(d.RepoServerNames)
	if len(d.RepoServerPrograms) == 0 {
		return byName
	}
	return "(" + byName + " || " + p.containerRunsRepoServer(c) + ")"
}

func (p *program) containerRunsRepoServer(c string) string {
	progs := make([]string, len(p.cat.Defaults.RepoServerPrograms))
	for i, prog := range p.cat.Defaults.RepoServerPrograms {
		progs[i] = regexp.QuoteMeta(prog)
	}
	// Wrappers and shells as pkg/inject's program() looks through them, at
	// most 8 deep; each word's directory is skipped as path.Base does.
	wrappers := `(?:tini|tini-static|dumb-init|entrypoint\.sh|uid_entrypoint\.sh|exec)(?:\s+-\S*)*\s+`
	shells := `(?:sh|bash|ash|dash)(?:\s+-\S*)*\s+`
	re := `^\s*(?:\S*/)?(?:(?:` + wrappers + `|` + shells + `)(?:\S*/)?){0,8}(?:` + strings.Join(progs, "|") + `)(?:\s|$)`
	return "(" + c + ".?command.orValue([]) + " + c + ".?args.orValue([])).join(\" \").matches(" + quote(re) + ")"
}

// matchRepoServer is the match condition both policies share.
func (p *program) matchRepoServer() string {
	return "object.spec.containers.exists(c, " + p.containerIsRepoServer("c") + ")"
}

// matchNotInjected: a pod that already has the status annotation is not
// injected again (the webhook checks what it owns; see docs/policy-mode.md).
const matchNotInjected = "!has(object.metadata.annotations) || !(" + `"` + keys.StatusAnnotation + `"` + " in object.metadata.annotations)"
