// Package helmplugin is the built-in Helm config management plugin: `cmp-server helm
// generate` renders a chart with `helm template` from the Application's parameters,
// and `cmp-server helm parameters` announces the chart's parameters. Both build argv
// directly, so user input never passes through a shell.
package helmplugin

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

const usage = `usage: cmp-server helm <generate|parameters> [--repo-root DIR]

  generate     render the chart in the working directory with helm template
  parameters   print the chart's parameter announcement as a JSON array

Parameters come from ARGOCD_APP_PARAMETERS. Paths they name must stay inside the
repository root: --repo-root, else $CMP_REPO_ROOT, else the working directory.
`

// Main runs one helm plugin subcommand. args follow "cmp-server helm"; the process
// env is the plugin env and the working directory is the app dir. It returns the
// process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	sub := args[0]
	var run func(context.Context, Request) error
	switch sub {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	case "generate":
		run = Generate
	case "parameters":
		run = Announce
	default:
		fmt.Fprintf(stderr, "cmp-server helm: unknown subcommand %q\n%s", sub, usage)
		return 2
	}
	fs := flag.NewFlagSet("cmp-server helm "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	repoRoot := fs.String("repo-root", "", "repository root that bounds every path a parameter names")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "cmp-server helm %s: unexpected arguments %q\n", sub, fs.Args())
		return 2
	}
	dir, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(stderr, "cmp-server helm %s: %v\n", sub, err)
		return 1
	}
	err = run(ctx, Request{Env: environ(os.Environ()), AppDir: dir, RepoRoot: *repoRoot, Stdout: stdout, Stderr: stderr})
	if err == nil {
		return 0
	}
	var helmErr *HelmError
	if errors.As(err, &helmErr) {
		// helm's own message is the error text the user sees, unprefixed.
		fmt.Fprintln(stderr, helmErr.Error())
		return helmErr.ExitCode
	}
	fmt.Fprintf(stderr, "cmp-server helm %s: %v\n", sub, err)
	return 1
}

// environ turns KEY=value pairs into a map; a later duplicate wins, as with exec.
func environ(kv []string) map[string]string {
	env := make(map[string]string, len(kv))
	for _, e := range kv {
		if k, v, ok := strings.Cut(e, "="); ok && k != "" {
			env[k] = v
		}
	}
	return env
}
