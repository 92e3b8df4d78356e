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
// A refresh (--concurrency > 1) sends its requests as the application
// controller's status processors do on a hard refresh: up to that many at
// once, none cached; --discover-app names Applications that name no plugin
// (the repo-server then asks every plugin socket's MatchRepository, twice:
// once to tell the source type, once to pick the plugin), and
// --manifest-generate-paths packs only the annotated paths for generation
// (the repo-server's --plugin-use-manifest-generate-paths, with every app
// annotated "."). The last line is the refresh's own wall time.
//
//	cmpbench --sock-dir DIR --plugin NAME --repo ROOT --app PATH[,PATH...] --runs N
//	cmpbench ... --discover-app PATH[,PATH...] --concurrency 20 [--manifest-generate-paths] [--revision SHA]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
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
	// TotalMs, on the last line only, is the wall time of all requests.
	TotalMs float64 `json:"totalMs,omitempty"`
}

// job is one request: an app, named (plugin set) or discovered.
type job struct {
	app   string
	named bool
}

func main() {
	sockDir := flag.String("sock-dir", "", "plugin socket dir (ARGOCD_PLUGINSOCKFILEPATH)")
	plugin := flag.String("plugin", "", "plugin name as an Application names it (<name>[-<version>])")
	repo := flag.String("repo", "", "repository root (a checked-out tree)")
	apps := flag.String("app", ".", "comma-separated app paths relative to the root; each run requests every one in turn")
	runs := flag.Int("runs", 1, "runs")
	timeout := flag.Duration("timeout", 5*time.Minute, "deadline of each request")
	discovered := flag.String("discover-app", "", "comma-separated app paths of Applications that name no plugin (discovery)")
	concurrency := flag.Int("concurrency", 1, "requests in flight at once")
	mgp := flag.Bool("manifest-generate-paths", false, "pack only the annotated paths for generation (every app annotated \".\")")
	revision := flag.String("revision", "0123456789abcdef0123456789abcdef01234567", "the revision the requests name (ARGOCD_APP_REVISION)")
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
	var jobs []job
	for _, app := range strings.Split(*apps, ",") {
		if app != "" {
			jobs = append(jobs, job{app: app, named: true})
		}
	}
	for _, app := range strings.Split(*discovered, ",") {
		if app != "" {
			jobs = append(jobs, job{app: app})
		}
	}
	out := json.NewEncoder(os.Stdout)
	var mu sync.Mutex
	start := time.Now()
	for range *runs {
		work := make(chan job)
		var wg sync.WaitGroup
		var failed atomic.Value
		for range max(1, *concurrency) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range work {
					r, err := request(j, *plugin, *repo, *revision, tmp, excluded, *mgp, *timeout)
					if err != nil {
						failed.Store(err)
						continue
					}
					mu.Lock()
					_ = out.Encode(r)
					mu.Unlock()
				}
			}()
		}
		for _, j := range jobs {
			work <- j
		}
		close(work)
		wg.Wait()
		if err, ok := failed.Load().(error); ok {
			fail(err)
		}
	}
	if *concurrency > 1 {
		_ = out.Encode(result{TotalMs: float64(time.Since(start).Microseconds()) / 1000})
	}
}

// request runs GenerateManifests for one app as the repo-server does.
func request(j job, plugin, repo, revision, tmp string, excluded []string, mgp bool, timeout time.Duration) (result, error) {
	src := &v1alpha1.ApplicationSource{Path: j.app}
	if j.named {
		src.Plugin = &v1alpha1.ApplicationSourcePlugin{Name: plugin}
	}
	q := &apiclient.ManifestRequest{
		Repo:              &v1alpha1.Repository{Repo: "https://example.com/bench.git"},
		Revision:          revision,
		AppName:           "bench-" + strings.ReplaceAll(j.app, "/", "-"),
		Namespace:         "default",
		ApplicationSource: src,
		ProjectName:       "default",
	}
	if mgp {
		q.AnnotationManifestGeneratePaths = "."
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
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
	resp, err := repository.GenerateManifests(ctx, repo+"/"+j.app, repo, q.Revision, q, false, git.NoopCredsStore{},
		resource.MustParse("1G"), utilio.NewRandomizedTempPaths(tmp), repository.WithCMPTarExcludedGlobs(excluded),
		repository.WithCMPTarDoneChannel(tarDone), repository.WithCMPUseManifestGeneratePaths(mgp))
	elapsed := time.Since(start)
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
		return result{}, fmt.Errorf("app %s: %w", j.app, err)
	}
	return result{App: j.app, Ms: float64(elapsed.Microseconds()) / 1000, PackMs: packMs, Manifests: len(resp.Manifests)}, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
