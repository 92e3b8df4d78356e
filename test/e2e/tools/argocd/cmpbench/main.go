// Command cmpbench drives plugin servers with Argo CD's own repo-server code:
// each request is reposerver/repository.GenerateManifests for an Application
// naming a sidecar plugin, exactly what argocd-repo-server runs for it
// (packing the repository with util/tgzstream, CheckPluginConfiguration, the
// GenerateManifest stream in ARGOCD_CMP_CHUNK_SIZE chunks, tar exclusions from
// ARGOCD_REPO_SERVER_PLUGIN_TAR_EXCLUSIONS as the repo-server's flag reads
// them). It prints one JSON line per request: the app path, the wall time
// and the time until the client had packed the repository (its tar done
// signal), after which the plugin server receives anything.
//
//	cmpbench --sock-dir DIR --plugin NAME --repo ROOT --app PATH[,PATH...] --runs N
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/argo-cd/v3/reposerver/apiclient"
	"github.com/argoproj/argo-cd/v3/reposerver/repository"
	"github.com/argoproj/argo-cd/v3/util/env"
	"github.com/argoproj/argo-cd/v3/util/git"
	utilio "github.com/argoproj/argo-cd/v3/util/io"
)

type result struct {
	App       string  `json:"app"`
	Ms        float64 `json:"ms"`
	PackMs    float64 `json:"packMs"`
	Manifests int     `json:"manifests"`
}

func main() {
	sockDir := flag.String("sock-dir", "", "plugin socket dir (ARGOCD_PLUGINSOCKFILEPATH)")
	plugin := flag.String("plugin", "", "plugin name as an Application names it (<name>[-<version>])")
	repo := flag.String("repo", "", "repository root (a checked-out tree)")
	apps := flag.String("app", ".", "comma-separated app paths relative to the root; each run requests every one in turn")
	runs := flag.Int("runs", 1, "runs")
	timeout := flag.Duration("timeout", 5*time.Minute, "deadline of each request")
	flag.Parse()
	if *sockDir == "" || *plugin == "" || *repo == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := os.Setenv("ARGOCD_PLUGINSOCKFILEPATH", *sockDir); err != nil {
		fail(err)
	}
	// The repo-server's own flag default (cmd/argocd-repo-server).
	excluded := env.StringsFromEnv("ARGOCD_REPO_SERVER_PLUGIN_TAR_EXCLUSIONS", []string{}, ";")
	tmp, err := os.MkdirTemp("", "cmpbench-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(tmp)
	out := json.NewEncoder(os.Stdout)
	for range *runs {
		for _, app := range strings.Split(*apps, ",") {
			q := &apiclient.ManifestRequest{
				Repo:              &v1alpha1.Repository{Repo: "https://example.com/bench.git"},
				Revision:          "0123456789abcdef0123456789abcdef01234567",
				AppName:           "bench",
				Namespace:         "default",
				ApplicationSource: &v1alpha1.ApplicationSource{Path: app, Plugin: &v1alpha1.ApplicationSourcePlugin{Name: *plugin}},
				ProjectName:       "default",
			}
			ctx, cancel := context.WithTimeout(context.Background(), *timeout)
			// The repo-server's tar done signal: sent once the tarball is
			// written, before the first message goes to the plugin.
			tarDone := make(chan bool)
			packed := make(chan time.Time, 1)
			go func() {
				if _, ok := <-tarDone; ok {
					packed <- time.Now()
				}
				close(packed)
			}()
			start := time.Now()
			resp, err := repository.GenerateManifests(ctx, *repo+"/"+app, *repo, q.Revision, q, false, git.NoopCredsStore{},
				resource.MustParse("1G"), utilio.NewRandomizedTempPaths(tmp), repository.WithCMPTarExcludedGlobs(excluded),
				repository.WithCMPTarDoneChannel(tarDone))
			elapsed := time.Since(start)
			cancel()
			var packMs float64
			select {
			case t, ok := <-packed:
				if ok {
					packMs = float64(t.Sub(start).Microseconds()) / 1000
				}
			case <-time.After(time.Second):
				// No signal (not a sidecar request): no figure.
			}
			if err != nil {
				fail(fmt.Errorf("app %s: %w", app, err))
			}
			_ = out.Encode(result{App: app, Ms: float64(elapsed.Microseconds()) / 1000, PackMs: packMs, Manifests: len(resp.Manifests)})
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
