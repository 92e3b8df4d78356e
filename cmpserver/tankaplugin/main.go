// Package tankaplugin is the built-in Tanka config management plugin:
// `cmp-server tanka generate` shows the Tanka environment in the app
// directory with Grafana's tk, its Jsonnet variables taken from the
// Application's parameters. The argv is built directly, so no parameter
// passes through a shell (the plugin image has none).
package tankaplugin

import (
	"context"

	"github.com/cmp-injector/cmp-injector/cmpserver/toolrun"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// Command is `cmp-server tanka`, added to cmp-server's commands by cmd/cmp-server.
var Command = serving.Command{
	Name:    "tanka",
	Summary: "the built-in Tanka plugin: generate shows the app's environment with its parameters",
	Run:     runCommand,
}

const notes = `actions:
  generate     tk show of the environment in the app directory (the project's root is
               where tk finds jsonnetfile.json above it, as tk does)

Parameters come from ARGOCD_APP_PARAMETERS: ext-vars, ext-code, tlas, tla-code (maps)
become --ext-str, --ext-code, --tla-str, --tla-code; name (string) --name, for a file
of inline environments; targets (array) --target each. The tk command is looked up
on PATH.`

// runCommand runs one tanka plugin action. args follow "cmp-server tanka";
// the process env is the plugin env and the working directory the app dir.
func runCommand(ctx context.Context, args []string, stdio serving.IO) error {
	fs := serving.NewFlagSet("cmp-server tanka", "generate")
	fs.Notes(notes)
	// tk prints YAML documents; the plugin server splits them.
	return toolrun.StreamGenerate(ctx, fs, args, stdio, "tk", tkArgs)
}
