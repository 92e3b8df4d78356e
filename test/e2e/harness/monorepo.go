package harness

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The monorepo of issue 40's refresh: N Applications in one repository of a
// realistic mix, the same for the bench's repo-server-code refresh (cmd/bench)
// and the whole Argo CD's (TestRefreshBench), so their figures compare.

// RefreshSize is one size of the refresh: quick, 100 or 500 Applications.
type RefreshSize struct {
	Apps, Files int
}

// RefreshSizes are the sizes by name; quick keeps a run within minutes on 2
// cores.
var RefreshSizes = map[string]RefreshSize{
	"quick": {Apps: 20, Files: 600},
	"100":   {Apps: 100, Files: 3000},
	"500":   {Apps: 500, Files: 3000},
}

// The refresh's goals (issue 40), ours with the injector's settings over
// Argo CD's hand-written sidecar with the stock repo-server: wall time,
// sidecar CPU and peak memory; and the wall time of a refresh after a commit
// outside every app with the render cache on. Both benches print them as
// pass lines; nothing asserts them.
const (
	RefreshGoalWall       = 0.5
	RefreshGoalSidecarCPU = 0.3
	RefreshGoalSidecarRSS = 0.3
	RefreshGoalCachedWall = 0.2
)

// RefreshPluginName is the refresh's plugin.
const RefreshPluginName = "refresh"

// RefreshPluginYAML is the refresh's plugin.yaml in Argo CD's documented
// sidecar shape: discovery by file name (a kustomization.yaml in the app),
// a generate that prints the app's one object, so the figures are the
// servers' and the streams', not a tool's. specExtra is added under spec
// (e.g. "\n  readOnlyRepository: true").
func RefreshPluginYAML(specExtra string) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: ConfigManagementPlugin
metadata:
  name: %s
spec:%s
  discover:
    fileName: "./kustomization.yaml"
  generate:
    command: [sh, -c, 'printf "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%%s\"}}" "$ARGOCD_APP_NAME"']
`, RefreshPluginName, specExtra)
}

// RefreshApp is the path of app i in the monorepo. Even apps name the plugin,
// odd ones are discovered.
func RefreshApp(i int) string { return fmt.Sprintf("apps/app-%03d", i) }

// Monorepo writes a monorepo of size.Files files of about 10 kB under root (a
// mix: per app a kustomization.yaml and its manifests; shared Helm charts,
// kustomize bases, docs and binary images, which do not compress) and
// returns the files' size in MB. The content is the same for a size on every
// run (a seeded generator).
func Monorepo(root string, size RefreshSize) (float64, error) {
	rng := rand.New(rand.NewPCG(uint64(size.Files), uint64(size.Apps)))
	words := strings.Fields("apiVersion kind metadata name namespace spec replicas image tag values chart labels app selector template containers ports env")
	text := func(n int) []byte {
		var b bytes.Buffer
		for b.Len() < n {
			b.WriteString(words[rng.IntN(len(words))])
			b.WriteString(": ")
			b.WriteString(strconv.FormatUint(rng.Uint64(), 36))
			b.WriteByte('\n')
		}
		return b.Bytes()[:n]
	}
	var total int
	write := func(rel string, body []byte) error {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		total += len(body)
		return os.WriteFile(p, body, 0o644)
	}
	const perApp = 4 // kustomization.yaml and three manifests
	files := 0
	for i := range size.Apps {
		app := RefreshApp(i)
		if err := write(app+"/kustomization.yaml", []byte("resources: [deployment.yaml, service.yaml, config.yaml]\n")); err != nil {
			return 0, err
		}
		for _, f := range []string{"deployment.yaml", "service.yaml", "config.yaml"} {
			if err := write(app+"/"+f, text(10_000)); err != nil {
				return 0, err
			}
		}
		files += perApp
	}
	for i := 0; files < size.Files; i, files = i+1, files+1 {
		var err error
		switch i % 10 {
		case 0, 1, 2:
			err = write(fmt.Sprintf("charts/chart-%02d/templates/t%d.yaml", i%20, i), text(10_000))
		case 3, 4, 5:
			err = write(fmt.Sprintf("bases/base-%02d/b%d.yaml", i%30, i), text(10_000))
		case 6, 7, 8:
			err = write(fmt.Sprintf("docs/d%d.md", i), text(10_000))
		default:
			img := make([]byte, 10_000)
			for j := 0; j+8 <= len(img); j += 8 {
				v := rng.Uint64()
				for k := range 8 {
					img[j+k] = byte(v >> (8 * k))
				}
			}
			err = write(fmt.Sprintf("images/i%d.png", i), img)
		}
		if err != nil {
			return 0, err
		}
	}
	return float64(total) / 1e6, nil
}
