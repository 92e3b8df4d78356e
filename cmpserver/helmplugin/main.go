// Package helmplugin is the built-in Helm config management plugin: `cmp-server helm
// generate` renders a chart with `helm template` from the Application's parameters,
// and `cmp-server helm parameters` announces the chart's parameters. Both build argv
// directly, so user input never passes through a shell.
package helmplugin

import (
	"context"
	"fmt"
	"io"
)

const usage = `usage: cmp-server helm <generate|parameters> [--repo-root DIR]

  generate     render the chart in the working directory with helm template
  parameters   print the chart's parameter announcement as a JSON array
`

// Main runs one helm plugin subcommand. args follow "cmp-server helm"; the process
// env is the plugin env and the working directory is the app dir. It returns the
// process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "cmp-server helm: unknown subcommand %q\n%s", args[0], usage)
		return 2
	}
}
