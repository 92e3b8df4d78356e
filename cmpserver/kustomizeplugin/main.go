// Package kustomizeplugin is the built-in Kustomize config management plugin:
// `cmp-server kustomize generate` applies the Application's name prefix, name
// suffix and image overrides with `kustomize edit` and prints `kustomize
// build`; with --enable-helm it also inflates the kustomization's helmCharts
// with helm. `cmp-server kustomize helm-charts` is the discovery of the
// kustomize-helm plugin. Every value is one argv element after "--": no
// parameter passes through a shell (the plugin image has none).
package kustomizeplugin

import (
	"context"
	"fmt"
	"os"

	"github.com/cmp-injector/cmp-injector/cmpserver/toolrun"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// Command is `cmp-server kustomize`, added to cmp-server's commands by cmd/cmp-server.
var Command = serving.Command{
	Name:    "kustomize",
	Summary: "the built-in Kustomize plugin: generate builds the app's kustomization with its parameters",
	Run:     runCommand,
}

const notes = `actions:
  generate     kustomize edit set nameprefix / namesuffix / image from the parameters,
               in the app directory (the request's private copy), then kustomize build;
               --enable-helm inflates helmCharts with the helm command on PATH
  helm-charts  discovery: print the kustomization file's name when it lists helmCharts,
               nothing otherwise

Parameters come from ARGOCD_APP_PARAMETERS: name-prefix, name-suffix (strings),
images (array of kustomize image specs), version (runs kustomize-<version> from PATH
when present, else requires kustomize to be that version).`

// runCommand runs one kustomize plugin action. args follow "cmp-server
// kustomize"; the process env is the plugin env and the working directory
// the app dir.
func runCommand(ctx context.Context, args []string, stdio serving.IO) error {
	fs := serving.NewFlagSet("cmp-server kustomize", "generate [--enable-helm] | helm-charts")
	fs.Notes(notes)
	enableHelm := fs.Bool("enable-helm", false, "generate: inflate the kustomization's helmCharts with helm (kustomize build --enable-helm)")
	action, err := fs.ParseAction(args)
	if err != nil {
		return err
	}
	switch action {
	case "generate":
	case "helm-charts":
		if *enableHelm {
			return fs.Errorf("--enable-helm is a flag of generate, not of helm-charts")
		}
		dir, err := os.Getwd()
		if err != nil {
			return err
		}
		name, err := helmChartsFile(dir)
		if err != nil || name == "" {
			return err
		}
		_, err = fmt.Fprintln(stdio.Stdout, name)
		return err
	case "":
		return fs.Errorf("an action is required: generate or helm-charts")
	default:
		return fs.Errorf("unknown action %q: want generate or helm-charts", action)
	}
	ps, dir, err := toolrun.AppRequest()
	if err != nil {
		return err
	}
	p, warnings, err := newPlan(ps, *enableHelm)
	if werr := toolrun.Warn(stdio.Stderr, warnings); werr != nil {
		return werr
	}
	if err != nil {
		return err
	}
	return generate(ctx, p, dir, os.Environ(), stdio)
}
