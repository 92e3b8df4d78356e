// Package jsonnetplugin is the built-in Jsonnet config management plugin:
// `cmp-server jsonnet generate` evaluates the app's Jsonnet file with the
// jsonnet command, its external variables and top-level arguments taken from
// the Application's parameters. The argv is built directly, so no parameter
// passes through a shell (the plugin image has none).
package jsonnetplugin

import (
	"context"
	"os"

	"github.com/cmp-injector/cmp-injector/cmpserver/toolrun"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// Command is `cmp-server jsonnet`, added to cmp-server's commands by cmd/cmp-server.
var Command = serving.Command{
	Name:    "jsonnet",
	Summary: "the built-in Jsonnet plugin: generate evaluates the app's Jsonnet with its parameters",
	Run:     runCommand,
}

const notes = `actions:
  generate     evaluate the app's Jsonnet file (parameter main, default main.jsonnet)
               and print each manifest it yields

Parameters come from ARGOCD_APP_PARAMETERS: ext-vars, ext-code, tlas, tla-code (maps)
become --ext-str, --ext-code, --tla-str, --tla-code; libs (array) --jpath each.
The jsonnet command is looked up on PATH.`

// runCommand runs one jsonnet plugin action. args follow "cmp-server jsonnet";
// the process env is the plugin env and the working directory the app dir.
func runCommand(ctx context.Context, args []string, stdio serving.IO) error {
	fs := serving.NewFlagSet("cmp-server jsonnet", "generate")
	fs.Notes(notes)
	ps, dir, err := toolrun.GenerateAction(fs, args)
	if err != nil {
		return err
	}
	argv, warnings, err := jsonnetArgs(ps)
	if werr := toolrun.Warn(stdio.Stderr, warnings); werr != nil {
		return werr
	}
	if err != nil {
		return err
	}
	return generate(ctx, argv, dir, os.Environ(), stdio)
}
