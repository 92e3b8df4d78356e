// Package helmplugin is the built-in Helm config management plugin: `cmp-server helm
// generate` renders a chart with `helm template` from the Application's parameters,
// and `cmp-server helm parameters` announces the chart's parameters. Both build argv
// directly, so user input never passes through a shell.
package helmplugin

import (
	"context"
	"os"
	"strings"

	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// Command is `cmp-server helm`, added to cmp-server's commands by cmd/cmp-server.
var Command = serving.Command{
	Name:    "helm",
	Summary: "the built-in Helm plugin: generate renders the chart, parameters announces its values",
	Run:     runCommand,
}

const notes = `actions:
  generate     render the chart in the working directory with helm template
  parameters   print the chart's parameter announcement as a JSON array

Parameters come from ARGOCD_APP_PARAMETERS. Paths they name must stay inside the
repository root: --repo-root, else $CMP_REPO_ROOT, else the working directory.`

// runCommand runs one helm plugin action. args follow "cmp-server helm"; the process
// env is the plugin env and the working directory is the app dir.
func runCommand(ctx context.Context, args []string, stdio serving.IO) error {
	fs := serving.NewFlagSet("cmp-server helm", "generate|parameters [--repo-root DIR]")
	fs.Notes(notes)
	repoRoot := fs.String("repo-root", "", "repository root that bounds every path a parameter names")
	action, err := fs.ParseAction(args)
	if err != nil {
		return err
	}
	var run func(context.Context, helmRequest) error
	switch action {
	case "generate":
		run = generateManifests
	case "parameters":
		run = announceParameters
	case "":
		return fs.Errorf("an action is required: generate or parameters")
	default:
		return fs.Errorf("unknown action %q: want generate or parameters", action)
	}
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	return run(ctx, helmRequest{Env: environ(os.Environ()), AppDir: dir, RepoRoot: *repoRoot, Stdout: stdio.Stdout, Stderr: stdio.Stderr})
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
