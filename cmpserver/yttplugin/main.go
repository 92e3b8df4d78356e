// Package yttplugin is the built-in ytt config management plugin: `cmp-server
// ytt generate` renders the app directory's templates with Carvel's ytt, its
// data values taken from the Application's parameters. The argv is built
// directly, so no parameter passes through a shell (the plugin image has none).
package yttplugin

import (
	"context"

	"github.com/cmp-injector/cmp-injector/cmpserver/toolrun"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// Command is `cmp-server ytt`, added to cmp-server's commands by cmd/cmp-server.
var Command = serving.Command{
	Name:    "ytt",
	Summary: "the built-in ytt plugin: generate renders the app's templates with its data values",
	Run:     runCommand,
}

const notes = `actions:
  generate     ytt -f on the app directory (or the files of parameter files), the
               data values of the parameters applied

Parameters come from ARGOCD_APP_PARAMETERS: data-values (map) become --data-value
(strings), data-values-yaml (map) --data-value-yaml (typed, e.g. replicas: "3" is
the integer 3), data-values-files (array) --data-values-file each, files (array,
default ".") -f each. Paths are relative to the app directory. The ytt command is
looked up on PATH.`

// runCommand runs one ytt plugin action. args follow "cmp-server ytt"; the
// process env is the plugin env and the working directory the app dir.
func runCommand(ctx context.Context, args []string, stdio serving.IO) error {
	fs := serving.NewFlagSet("cmp-server ytt", "generate")
	fs.Notes(notes)
	// ytt prints YAML documents; the plugin server splits them.
	return toolrun.StreamGenerate(ctx, fs, args, stdio, "ytt", yttArgs)
}
