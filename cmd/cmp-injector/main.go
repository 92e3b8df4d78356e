// Command cmp-injector is the admission webhook that adds Argo CD plugin sidecars
// to repo-server pods, its offline twins (inject, explain) and the certificate tool.
package main

import (
	"context"
	"os"

	"github.com/cmp-injector/cmp-injector/injector/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
