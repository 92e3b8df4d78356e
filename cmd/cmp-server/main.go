// Command cmp-server is the plugin server binary: a drop-in argocd-cmp-server
// (the default subcommand), its local runner and client, the copy step of the
// init container, and the built-in helm, jsonnet, kustomize, sops, ytt, tanka and cdk8s plugins
// and the argocd-vault-plugin pipeline.
package main

import (
	"context"
	"os"

	"github.com/cmp-injector/cmp-injector/cmpserver/avpplugin"
	"github.com/cmp-injector/cmp-injector/cmpserver/cdk8splugin"
	"github.com/cmp-injector/cmp-injector/cmpserver/cli"
	"github.com/cmp-injector/cmp-injector/cmpserver/helmplugin"
	"github.com/cmp-injector/cmp-injector/cmpserver/jsonnetplugin"
	"github.com/cmp-injector/cmp-injector/cmpserver/kustomizeplugin"
	"github.com/cmp-injector/cmp-injector/cmpserver/sopsplugin"
	"github.com/cmp-injector/cmp-injector/cmpserver/tankaplugin"
	"github.com/cmp-injector/cmp-injector/cmpserver/yttplugin"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, helmplugin.Command, jsonnetplugin.Command, kustomizeplugin.Command, sopsplugin.Command, avpplugin.Command, yttplugin.Command, tankaplugin.Command, cdk8splugin.Command))
}
