// Command cmp-server is the plugin server binary: a drop-in argocd-cmp-server
// (the default subcommand), its local runner and client, the copy step of the
// init container, and the helm plugin.
package main

import (
	"context"
	"os"

	"github.com/cmp-injector/cmp-injector/cmpserver/cli"
	"github.com/cmp-injector/cmp-injector/cmpserver/helmplugin"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, helmplugin.Command))
}
