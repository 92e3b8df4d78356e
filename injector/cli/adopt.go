package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cmp-injector/cmp-injector/pkg/adopt"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
	"github.com/cmp-injector/cmp-injector/pkg/version"
)

// copyImageRepository is the cmp-server image the chart's copy init
// container runs (charts/cmp-injector values catalog.copyImage).
const copyImageRepository = "ghcr.io/cmp-injector/cmp-server"

// adoptCmd reads manifests with hand-written CMP sidecars and writes the
// catalog and the opted-in workload; pkg/adopt decides, this only reads
// and writes.
func adoptCmd(_ context.Context, args []string, stdio serving.IO) error {
	fs := serving.NewFlagSet("cmp-injector adopt", "-f FILE --out-dir DIR [--namespace NS]")
	in := fs.String("f", "", "manifests to adopt from (required; - for stdin): the repo-server workload with its sidecars and the ConfigMaps they mount, helm template output of argo-helm, an argocd-operator ArgoCD resource, or argocd-cm")
	outDir := fs.String("out-dir", "", "directory for catalog.yaml and workload.yaml (required; made when missing)")
	var o adopt.Options
	fs.StringVar(&o.Namespace, "namespace", "", "namespace the catalog enables the plugins in (default: each object's metadata.namespace, else \"default\")")
	fs.StringVar(&o.CopyImage, "copy-image", copyImageRepository+":"+version.Version, "defaults.copyImage of the written catalog")
	fs.StringVar(&o.ArgoCDImage, "argocd-image", "", "image for a sidecar the input gives none: a legacy argocd-cm plugin, an operator sidecar without image (default: the repo-server's image, when the input has it)")
	fs.Notes("The report on stdout names everything that could not be carried over, why, and what to do.\n" +
		"Exit codes: 0 nothing essential lost; 1 something essential lost (the files are written all the same)\n" +
		"or the input cannot be read; 2 usage error.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || *outDir == "" {
		return fs.Errorf("-f and --out-dir are required")
	}
	data, err := readInput("adopt", *in, stdio.Stdin)
	if err != nil {
		return err
	}
	r, err := adopt.Adopt(data, o)
	if err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return err
	}
	for name, content := range map[string][]byte{"catalog.yaml": r.Catalog, "workload.yaml": r.Workload} {
		if len(content) == 0 {
			continue
		}
		if err := os.WriteFile(filepath.Join(*outDir, name), content, 0o644); err != nil {
			return err
		}
	}
	if err := r.WriteReport(stdio.Stdout); err != nil {
		return err
	}
	if r.Lost() {
		return fmt.Errorf("something essential was not carried over: see the report")
	}
	return nil
}
