// Package sopsplugin is the built-in SOPS config management plugin: `cmp-server
// sops generate` prints the app directory's manifests, each file that SOPS
// encrypted decrypted by the sops command. The key is sops's business: it
// reads it from the file SOPS_AGE_KEY_FILE names (a Secret volume of the
// sidecar); this server never reads it, and no plaintext passes through its
// logs or errors.
package sopsplugin

import (
	"context"
	"fmt"
	"os"

	"github.com/cmp-injector/cmp-injector/cmpserver/toolrun"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// Command is `cmp-server sops`, added to cmp-server's commands by cmd/cmp-server.
var Command = serving.Command{
	Name:    "sops",
	Summary: "the built-in SOPS plugin: generate prints the app's manifests, SOPS-encrypted files decrypted",
	Run:     runCommand,
}

const notes = `actions:
  generate     print every manifest file (*.yaml, *.yml, *.json, not dot files) of the
               working directory in name order; a file SOPS encrypted (a top-level sops
               key) is decrypted with the sops command on PATH

The key is read by sops itself, e.g. from the file SOPS_AGE_KEY_FILE names.`

// runCommand runs one sops plugin action. args follow "cmp-server sops"; the
// process env is the plugin env and the working directory the app dir.
func runCommand(ctx context.Context, args []string, stdio serving.IO) error {
	fs := serving.NewFlagSet("cmp-server sops", "generate")
	fs.Notes(notes)
	ps, dir, err := toolrun.GenerateAction(fs, args)
	if err != nil {
		return err
	}
	for _, p := range ps {
		fmt.Fprintf(stdio.Stderr, "warning: unknown parameter %q ignored: the sops plugin takes none\n", p.Name)
	}
	return generate(ctx, dir, os.Environ(), stdio)
}
