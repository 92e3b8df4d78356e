package catalog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

func TestParseExample(t *testing.T) {
	data, err := os.ReadFile("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if want := hex.EncodeToString(sum[:])[:12]; c.Revision != want {
		t.Errorf("default revision %q, want %q", c.Revision, want)
	}
	if !c.Defaults.NativeSidecars || c.Defaults.RunAsUser != 999 {
		t.Errorf("defaults not applied: %+v", c.Defaults)
	}
	if got := c.Defaults.Resources.Requests.Memory().String(); got != "64Mi" {
		t.Errorf("default memory request %s", got)
	}
	if !reflect.DeepEqual(c.Names, []string{"helm", "kustomize", "tanka"}) {
		t.Errorf("names %v", c.Names)
	}
	h := c.Plugins["helm"]
	if h.Socket != "helm.sock" || !strings.Contains(h.InlineYAML, "kind: ConfigManagementPlugin") {
		t.Errorf("helm entry: socket %q inline %q", h.Socket, h.InlineYAML)
	}
	if k := c.Plugins["kustomize"]; k.Config.ConfigMap.Key != "plugin.yaml" {
		t.Errorf("configMap key default %q", k.Config.ConfigMap.Key)
	}
	if got := c.Enabled("argocd"); !reflect.DeepEqual(got, []string{"kustomize", "helm"}) {
		t.Errorf("Enabled(argocd) = %v", got)
	}
	if !c.IsEnabled("anywhere", "helm") || c.IsEnabled("anywhere", "kustomize") || c.IsEnabled("argocd", "tanka") {
		t.Error("IsEnabled does not follow namespaces and \"*\"")
	}
}

// One message names every bad field, with its path.
func TestParseReportsEveryProblem(t *testing.T) {
	bad := `
apiVersion: cmp-injector.io/v1
kind: PluginCatalog
defaults:
  runAsUser: 0
  copyImagePullPolicy: Sometimes
  colour: blue
plugins:
  helm:
    imagePullPolicy: Always
    allowedImages: ["alpine/[helm"]
    env: [{name: "1BAD"}]
    config:
      fromImage: true
      configMap: {name: x}
  Bad_Name:
    image: x
    config: {fromImage: true}
  v1:
    image: a
    config:
      inline: {kind: ConfigManagementPlugin, metadata: {name: cdk8s}, spec: {version: v1, generate: {command: [a]}}}
  v1-again:
    image: a
    config:
      inline: {kind: ConfigManagementPlugin, metadata: {name: cdk8s}, spec: {version: v1, generate: {command: [a]}}}
  broken:
    image: a
    config:
      inline: {kind: ConfigManagementPlugin, metadata: {name: broken}, spec: {generat: {command: [a]}}}
  injector-sockets:
    image: a
    config: {fromImage: true}
namespaces:
  argocd: [helm, kustomise, helm]
`
	_, err := Parse([]byte(bad))
	var ve *validationError
	if err == nil || !asValidation(err, &ve) {
		t.Fatalf("want a validationError, got %v", err)
	}
	msg := err.Error()
	for _, want := range []string{
		`unknown field "defaults.colour"`,
		`apiVersion: must be "cmp-injector.io/v1alpha1"`,
		"defaults.copyImage: required",
		"defaults.copyImagePullPolicy: must be one of",
		"defaults.runAsUser: must be a non-root UID",
		"plugins.helm.image: required",
		"plugins.helm.allowedImages[0]: invalid pattern",
		"plugins.helm.env[0].name: invalid name",
		"plugins.helm.config: exactly one of inline, configMap, fromImage must be set (2 set)",
		"plugins.Bad_Name: invalid plugin name",
		`plugins.v1-again.config: socket "cdk8s-v1.sock" is already used by plugin "v1"`,
		`plugins.broken.config.inline: `,
		`plugins.injector-sockets: plugin name "injector-sockets" is reserved`,
		`namespaces.argocd[1]: unknown plugin "kustomise"`,
		`namespaces.argocd[2]: duplicate plugin "helm"`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, strings.ReplaceAll(msg, "; ", "\n"))
		}
	}
}

func asValidation(err error, ve **validationError) bool {
	return errors.As(err, ve)
}

// A default image its own allowedImages would refuse is valid, but said.
func TestWarnsWhenImageNotInItsAllowedImages(t *testing.T) {
	example, err := os.ReadFile("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(example)
	if err != nil || len(c.Warnings) != 0 {
		t.Fatalf("example: %v, warnings %q", err, c.Warnings)
	}
	odd := strings.Replace(string(example), `allowedImages: ["alpine/helm:*"]`, `allowedImages: ["ghcr.io/acme/helm:*"]`, 1)
	c, err = Parse([]byte(odd))
	if err != nil || len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], `plugins.helm.image "alpine/helm:3.16.2" does not match its own allowedImages (ghcr.io/acme/helm:*)`) {
		t.Errorf("%v, warnings %q", err, c.Warnings)
	}
}

func TestParseRejectsDuplicateKeysAndGarbage(t *testing.T) {
	example, err := os.ReadFile("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(example); err != nil {
		t.Fatal(err)
	}
	// The example with one key twice: only the duplicate can be refused.
	dup := strings.Replace(string(example), "    image: alpine/helm:3.16.2\n", "    image: alpine/helm:3.16.2\n    image: alpine/helm:3.16.3\n", 1)
	if dup == string(example) {
		t.Fatal("the example changed; the duplicate was not inserted")
	}
	for name, tc := range map[string]struct{ doc, want string }{
		"duplicate key": {dup, `key "image" already set in map`},
		"not yaml":      {"plugins: [", "yaml: line 1: did not find expected node content"},
		"wrong type":    {"plugins: 3\n", "decode: "},
	} {
		_, err := Parse([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.HasPrefix(err.Error(), "yaml: yaml:") {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

// A ConfigMap volume updates by swapping the ..data symlink; the watcher must
// see it, keep the old catalog on a bad version, and report it once.
func TestWatcherFollowsSymlinkSwapAndKeepsOldOnError(t *testing.T) {
	dir := t.TempDir()
	good, _ := os.ReadFile("testdata/example.yaml")
	writeVersion := func(n int, content []byte) {
		v := filepath.Join(dir, "v"+string(rune('0'+n)))
		if err := os.MkdirAll(v, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(v, "catalog.yaml"), content, 0o644); err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(dir, "..data_tmp")
		_ = os.Remove(tmp)
		if err := os.Symlink(v, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	writeVersion(1, good)
	if err := os.Symlink(filepath.Join("..data", "catalog.yaml"), filepath.Join(dir, "catalog.yaml")); err != nil {
		t.Fatal(err)
	}
	var loaded, failed atomic.Int32
	w := NewWatcher(filepath.Join(dir, "catalog.yaml"), Options{}, Hooks{
		Loaded: func(*Catalog) { loaded.Add(1) },
		Failed: func(error) { failed.Add(1) },
	})
	if changed, err := w.Reload(); !changed || err != nil {
		t.Fatalf("initial load: %v %v", changed, err)
	}
	first := w.Current()

	writeVersion(2, []byte("apiVersion: nope\n"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Polled as the injector polls it.
	p := &serving.Poller{Interval: 10 * time.Millisecond, Fingerprint: serving.FileHash(filepath.Join(dir, "catalog.yaml")),
		OnChange: func(string, error) { _, _ = w.Reload() }}
	go p.Run(ctx)
	waitFor(t, func() bool { return failed.Load() == 1 })
	if w.Current() != first {
		t.Fatal("a bad version replaced the catalog")
	}

	writeVersion(3, append([]byte("revision: r3\n"), good...))
	waitFor(t, func() bool { return w.Current().Revision == "r3" })
	time.Sleep(50 * time.Millisecond)
	if failed.Load() != 1 || loaded.Load() != 2 {
		t.Errorf("loaded %d failed %d, want 2 and 1", loaded.Load(), failed.Load())
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRepoServerSettings(t *testing.T) {
	const head = "apiVersion: cmp-injector.io/v1alpha1\nkind: PluginCatalog\ndefaults:\n  copyImage: ghcr.io/cmp-injector/cmp-server:v1\n"
	const tail = "plugins:\n  p: {image: busybox, config: {fromImage: true}}\n"
	for _, tc := range []struct {
		name, repoServer string
		want             []string // NAME=value
	}{
		{"defaults", "", []string{"ARGOCD_CMP_CHUNK_SIZE=32000", "ARGOCD_REPO_SERVER_PLUGIN_TAR_EXCLUSIONS=.git"}},
		{"both off", "  repoServer: {cmpChunkSize: 0, pluginTarExclusions: []}\n", nil},
		{"own values", "  repoServer: {cmpChunkSize: 262144, pluginTarExclusions: [.git, 'docs/*']}\n",
			[]string{"ARGOCD_CMP_CHUNK_SIZE=262144", "ARGOCD_REPO_SERVER_PLUGIN_TAR_EXCLUSIONS=.git;docs/*"}},
		{"chunk only", "  repoServer: {pluginTarExclusions: []}\n", []string{"ARGOCD_CMP_CHUNK_SIZE=32000"}},
		{"manifest-generate-paths, opted in", "  repoServer: {pluginUseManifestGeneratePaths: true}\n",
			[]string{"ARGOCD_CMP_CHUNK_SIZE=32000", "ARGOCD_REPO_SERVER_PLUGIN_TAR_EXCLUSIONS=.git", "ARGOCD_REPO_SERVER_PLUGIN_USE_MANIFEST_GENERATE_PATHS=true"}},
	} {
		c, err := Parse([]byte(head + tc.repoServer + tail))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got []string
		for _, e := range c.Defaults.RepoServerEnv {
			got = append(got, e.Name+"="+e.Value)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: env %q, want %q", tc.name, got, tc.want)
		}
	}
	_, err := Parse([]byte(head + "  repoServer: {cmpChunkSize: -1, pluginTarExclusions: ['[', 'a;b', '']}\n" + tail))
	for _, want := range []string{
		"defaults.repoServer.cmpChunkSize: must be between 0",
		`defaults.repoServer.pluginTarExclusions[0]: "["`,
		`defaults.repoServer.pluginTarExclusions[1]: "a;b"`,
		`defaults.repoServer.pluginTarExclusions[2]: ""`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to contain %q", err, want)
		}
	}
}

// An inline plugin.yaml with spec.version loads (every released Argo CD
// serves it), with the warning of what Argo CD 4.0 will refuse and the rewrite.
func TestWarnsOfSpecVersion(t *testing.T) {
	c, err := Parse([]byte(`apiVersion: cmp-injector.io/v1alpha1
kind: PluginCatalog
defaults: {copyImage: cmp-server:1}
plugins:
  helm:
    image: alpine/helm:3.16.2
    config:
      inline: {kind: ConfigManagementPlugin, metadata: {name: helm}, spec: {version: v2, generate: {command: [helm, template, .]}}}
namespaces:
  argocd: [helm]
`))
	if err != nil || len(c.Warnings) != 1 || !strings.HasPrefix(c.Warnings[0], "plugins.helm.config: spec.version \"v2\" is removed in Argo CD 4.0") ||
		!strings.Contains(c.Warnings[0], "metadata.name: helm-v2") {
		t.Errorf("%v, warnings %q", err, c.Warnings)
	}
}
