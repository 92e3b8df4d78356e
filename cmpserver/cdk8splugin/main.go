// Package cdk8splugin is the built-in cdk8s config management plugin:
// `cmp-server cdk8s generate` synthesizes the app directory's cdk8s app with
// cdk8s-cli (cdk8s synth --stdout), the app's environment variables taken
// from the Application's parameters. The cmp-cdk8s image holds Node.js from
// Debian and cdk8s-cli with the libraries an app requires (hack/images).
package cdk8splugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cmp-injector/cmp-injector/cmpserver/toolrun"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// Command is `cmp-server cdk8s`, added to cmp-server's commands by cmd/cmp-server.
var Command = serving.Command{
	Name:    "cdk8s",
	Summary: "the built-in cdk8s plugin: generate synthesizes the app's cdk8s app",
	Run:     runCommand,
}

const notes = `actions:
  generate     cdk8s synth --stdout in the app directory: the app command of its
               cdk8s.yaml (or of the app parameter), its manifests on stdout

Parameters come from ARGOCD_APP_PARAMETERS: env (map) sets the app's environment
variables (a cdk8s app reads its settings from process.env); app (string) replaces
cdk8s.yaml's app command. The cdk8s command is looked up on PATH; it never checks
npm for a newer cdk8s-cli.`

// configFile is what makes a directory a cdk8s app (cdk8s init writes it;
// discovery looks for it).
const configFile = "cdk8s.yaml"

// runCommand runs one cdk8s plugin action. args follow "cmp-server cdk8s";
// the process env is the plugin env and the working directory the app dir.
func runCommand(ctx context.Context, args []string, stdio serving.IO) error {
	fs := serving.NewFlagSet("cmp-server cdk8s", "generate")
	fs.Notes(notes)
	ps, dir, err := toolrun.GenerateAction(fs, args)
	if err != nil {
		return err
	}
	r, err := synthArgs(ps)
	if werr := toolrun.Warn(stdio.Stderr, r.warnings); werr != nil {
		return werr
	}
	if err != nil {
		return err
	}
	if !r.hasApp {
		if _, err := os.Stat(filepath.Join(dir, configFile)); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("no %s in the app directory and no app parameter: cdk8s synth needs the app's command (cdk8s init writes %s)", configFile, configFile)
		}
	}
	// cdk8s synth --stdout prints YAML documents; the plugin server splits them.
	return toolrun.StreamTo(ctx, stdio, "cdk8s", r.argv, dir, append(os.Environ(), r.env...), withoutStack)
}

// withoutStack is Node.js's failure without its stack frames (the "    at"
// lines): Argo CD shows the whole text on the Application, where the
// thrown error and the file and line that threw are what the user needs.
func withoutStack(msg string) string {
	lines := strings.Split(msg, "\n")
	kept := lines[:0]
	for _, l := range lines {
		if !strings.HasPrefix(strings.TrimSpace(l), "at ") || !strings.HasPrefix(l, " ") {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "\n")
}
