// Package plugins holds the example plugins' tests: each plugin.yaml is run through
// the real local runner (`cmp-server run`) with the pinned helm, kustomize, jsonnet and
// sops of the repository's bin/ on PATH, as the plugins' commands find them in their images.
package plugins

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/params"
	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
	"github.com/cmp-injector/cmp-injector/test/sopstest"
)

// runTimeout bounds one runner invocation; the runner's own exec timeout is lower.
const runTimeout = 2 * time.Minute

var (
	cmpServer string // the cmp-server binary built for this test run
	toolsBin  string // <repo>/bin, with the pinned helm and kustomize
)

func TestMain(m *testing.M) {
	code, err := buildAndRun(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func buildAndRun(m *testing.M) (int, error) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return 0, err
	}
	toolsBin = filepath.Join(root, "bin")
	for _, tool := range []string{"helm", "kustomize", "jsonnet", "sops", "age-keygen"} {
		if _, err := os.Stat(filepath.Join(toolsBin, tool)); err != nil {
			return 0, fmt.Errorf("%s not found in %s: run hack/tools.sh %s", tool, toolsBin, tool)
		}
	}
	tmp, err := os.MkdirTemp("", "plugins-test-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	cmpServer = filepath.Join(tmp, "cmp-server")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", cmpServer, "./cmd/cmp-server")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("building cmp-server: %w\n%s", err, out)
	}
	return m.Run(), nil
}

// invocation is one `cmp-server run` of a plugin.yaml on an app directory.
type invocation struct {
	action string // generate, parameters or match
	config string // plugin.yaml; a name alone means deploy/plugins/<name>/plugin.yaml
	app    string // app dir; relative paths are under testdata/
	params []params.AppParameter
	args   []string // further runner flags
	path   string   // PATH of the sidecar; default <repo>/bin and the system's
	env    []string // further sidecar env, NAME=value
}

// run executes inv and returns stdout, stderr and the error of a non-zero exit.
func run(t *testing.T, inv invocation) (string, string, error) {
	t.Helper()
	config := inv.config
	if !strings.Contains(config, string(filepath.Separator)) {
		config = filepath.Join(config, "plugin.yaml")
	}
	app := inv.app
	if !filepath.IsAbs(app) {
		app = filepath.Join("testdata", app)
	}
	args := []string{"run", inv.action, "--config", config, "--app-dir", app, "--logformat", "text", "--loglevel", "error"}
	if inv.params != nil {
		enc, err := params.Encode(inv.params)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "params.json")
		if err := os.WriteFile(file, []byte(enc), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--parameters", file)
	}
	args = append(args, inv.args...)
	path := inv.path
	if path == "" {
		path = toolsBin + ":/usr/local/bin:/usr/bin:/bin"
	}
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, cmpServer, args...)
	// The sidecar env of the catalog: a private HOME and helm's directories under it.
	cmd.Env = []string{
		"PATH=" + path,
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"HELM_CACHE_HOME=" + filepath.Join(home, "helm", "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(home, "helm", "config"),
		"HELM_DATA_HOME=" + filepath.Join(home, "helm", "data"),
	}
	cmd.Env = append(cmd.Env, inv.env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// generate runs inv's generate and returns the manifests by kind/name.
func generate(t *testing.T, inv invocation) map[string]map[string]any {
	t.Helper()
	inv.action = "generate"
	out, stderr, err := run(t, inv)
	if err != nil {
		t.Fatalf("generate: %v\n%s", err, stderr)
	}
	objs := map[string]map[string]any{}
	for _, doc := range strings.Split(out, "\n---\n") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("manifest %q: %v", doc, err)
		}
		if obj == nil {
			continue
		}
		objs[fmt.Sprintf("%v/%v", obj["kind"], field(obj, "metadata", "name"))] = obj
	}
	if len(objs) == 0 {
		t.Fatalf("generate printed no manifests; stderr:\n%s", stderr)
	}
	return objs
}

// refused runs inv and expects a non-zero exit whose stderr holds want.
func refused(t *testing.T, inv invocation, want string) {
	t.Helper()
	refusedOutput(t, inv, want)
}

// field walks nested maps and lists (an int step indexes a list).
func field(v any, path ...any) any {
	for _, p := range path {
		switch s := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[s]
		case int:
			l, _ := v.([]any)
			if s >= len(l) {
				return nil
			}
			v = l[s]
		}
	}
	return v
}

func names(objs map[string]map[string]any) []string {
	var out []string
	for k := range objs {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func containerImages(deploy map[string]any) []string {
	var out []string
	list, _ := field(deploy, "spec", "template", "spec", "containers").([]any)
	for _, c := range list {
		out = append(out, fmt.Sprint(field(c, "image")))
	}
	return out
}

// hostile is a value a user may type; it must reach the tool as one literal argument.
const hostile = "a b \"dq\" 'sq' $(id) `id` ${HOME} ;|&\nsecond line-"

func TestDiscovery(t *testing.T) {
	apps := []string{"kustomize", "kustomize-helm", "trivial-cmp", "kustomize-helm/charts/hello", "jsonnet"}
	want := map[string][]bool{
		"helm":           {false, false, false, true, false},
		"kustomize":      {true, true, false, false, false},
		"kustomize-helm": {false, true, false, false, false},
		"trivial-cmp":    {false, false, true, false, false},
		"jsonnet":        {false, false, false, false, true},
	}
	for plugin, matches := range want {
		for i, app := range apps {
			t.Run(plugin+" on "+app, func(t *testing.T) {
				out, stderr, err := run(t, invocation{action: "match", config: plugin, app: app})
				if err != nil {
					t.Fatalf("match: %v\n%s", err, stderr)
				}
				if got := strings.TrimSpace(out); got != fmt.Sprint(matches[i]) {
					t.Errorf("match = %s, want %v", got, matches[i])
				}
			})
		}
	}
}

// TestKustomizeHelmIsTriedFirst: both kustomize plugins match an app whose
// kustomization.yaml lists helmCharts, and Argo CD tries plugin sockets in file name
// order, the first match winning. Only kustomize-helm builds such an app (the kustomize
// plugin lacks --enable-helm), so its socket must sort first.
func TestKustomizeHelmIsTriedFirst(t *testing.T) {
	sockets := map[string]string{}
	for _, name := range []string{"kustomize", "kustomize-helm"} {
		p, _, err := pluginconfig.Load(filepath.Join(name, "plugin.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		sockets[name] = p.SocketName()
	}
	if sockets["kustomize-helm"] >= sockets["kustomize"] {
		t.Errorf("socket %s does not sort before %s: Argo CD would give helmCharts apps to the kustomize plugin",
			sockets["kustomize-helm"], sockets["kustomize"])
	}
	refused(t, invocation{action: "generate", config: "kustomize", app: "kustomize-helm"}, "--enable-helm")
}

func TestKustomize(t *testing.T) {
	t.Run("no parameters", func(t *testing.T) {
		objs := generate(t, invocation{config: "kustomize", app: "kustomize"})
		if got, want := names(objs), []string{"ConfigMap/settings", "Deployment/web"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("objects = %q, want %q", got, want)
		}
		if got := containerImages(objs["Deployment/web"]); !reflect.DeepEqual(got, []string{"nginx:1.25", "busybox:1.36"}) {
			t.Errorf("images = %q", got)
		}
	})
	t.Run("prefix, suffix and images", func(t *testing.T) {
		objs := generate(t, invocation{config: "kustomize", app: "kustomize", params: []params.AppParameter{
			{Name: "name-prefix", String: str("team-a-")},
			{Name: "name-suffix", String: str("-v2")},
			{Name: "images", Array: []string{"nginx=registry.example.com/nginx:1.27", "busybox:1.37"}},
		}})
		if got, want := names(objs), []string{"ConfigMap/team-a-settings-v2", "Deployment/team-a-web-v2"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("objects = %q, want %q", got, want)
		}
		want := []string{"registry.example.com/nginx:1.27", "busybox:1.37"}
		if got := containerImages(objs["Deployment/team-a-web-v2"]); !reflect.DeepEqual(got, want) {
			t.Errorf("images = %q, want %q", got, want)
		}
	})
	t.Run("the repository's kustomization.yaml is not edited", func(t *testing.T) {
		before, err := os.ReadFile(filepath.Join("testdata", "kustomize", "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		generate(t, invocation{config: "kustomize", app: "kustomize", params: []params.AppParameter{{Name: "name-prefix", String: str("x-")}}})
		after, _ := os.ReadFile(filepath.Join("testdata", "kustomize", "kustomization.yaml"))
		if !bytes.Equal(before, after) {
			t.Errorf("kustomize edit reached the fixture:\n%s", after)
		}
	})
	t.Run("hostile prefix and suffix reach kustomize literally", func(t *testing.T) {
		for _, prefix := range []string{hostile, "--load-restrictor=none", "-"} {
			objs := generate(t, invocation{config: "kustomize", app: "kustomize", params: []params.AppParameter{
				{Name: "name-prefix", String: str(prefix)},
				{Name: "name-suffix", String: str(hostile)},
			}})
			name := "Deployment/" + prefix + "web" + hostile
			if _, ok := objs[name]; !ok {
				t.Errorf("no %q in %q", name, names(objs))
			}
		}
	})
	t.Run("hostile image reaches kustomize literally", func(t *testing.T) {
		objs := generate(t, invocation{config: "kustomize", app: "kustomize", params: []params.AppParameter{
			{Name: "images", Array: []string{"nginx=evil:1 $(id) `id`"}},
		}})
		if got := containerImages(objs["Deployment/web"])[0]; got != "evil:1 $(id) `id`" {
			t.Errorf("image = %q, want the value unexpanded", got)
		}
	})
	t.Run("an image kustomize cannot parse is refused with kustomize's reason", func(t *testing.T) {
		refused(t, invocation{action: "generate", config: "kustomize", app: "kustomize", params: []params.AppParameter{
			{Name: "images", Array: []string{"nginx:1.27", "x y"}},
		}}, "parameter images: Error: invalid format of image")
	})
	t.Run("bad parameters are refused before kustomize runs", func(t *testing.T) {
		for _, tc := range []struct {
			p    params.AppParameter
			want string
		}{
			{params.AppParameter{Name: "images", Array: []string{"nginx:1.27", " "}}, "parameter images: entry 1 is empty"},
			{params.AppParameter{Name: "images", String: str("nginx:1.27")}, "parameter images: want an array of kustomize image specs"},
			{params.AppParameter{Name: "name-prefix", Array: []string{"a-"}}, "parameter name-prefix: want a string"},
			{params.AppParameter{Name: "name-suffix", Map: map[string]string{"a": "b"}}, "parameter name-suffix: want a string"},
		} {
			refused(t, invocation{action: "generate", config: "kustomize", app: "kustomize", params: []params.AppParameter{tc.p}}, tc.want)
		}
	})
	t.Run("an unknown parameter is a warning", func(t *testing.T) {
		out, stderr, err := run(t, invocation{action: "generate", config: "kustomize", app: "kustomize", args: []string{"--loglevel", "info"},
			params: []params.AppParameter{{Name: "namePrefix", String: str("x-")}}})
		if err != nil || !strings.Contains(out, "name: web") {
			t.Fatalf("generate: %v\n%s", err, stderr)
		}
		if !strings.Contains(stderr, `unknown parameter \"namePrefix\" ignored (known: version, name-prefix, name-suffix, images)`) {
			t.Errorf("stderr lacks the warning:\n%s", stderr)
		}
	})
	t.Run("version", func(t *testing.T) {
		objs := generate(t, invocation{config: "kustomize", app: "kustomize", params: []params.AppParameter{{Name: "version", String: str("v5.8.2")}}})
		if _, ok := objs["Deployment/web"]; !ok {
			t.Errorf("objects = %q", names(objs))
		}
		refused(t, invocation{action: "generate", config: "kustomize", app: "kustomize",
			params: []params.AppParameter{{Name: "version", String: str("v9.9.9")}}},
			"kustomize v9.9.9 is not installed in this sidecar (kustomize is v5.8.2, and there is no kustomize-v9.9.9 on PATH)")
		for _, v := range []string{"v5;id", "../../bin/sh", "v5 x"} {
			refused(t, invocation{action: "generate", config: "kustomize", app: "kustomize",
				params: []params.AppParameter{{Name: "version", String: str(v)}}},
				"parameter version: only letters, digits and . + - are allowed")
		}
	})
	t.Run("version picks kustomize-<version> from PATH", func(t *testing.T) {
		// Only kustomize-v5.8.2 is on PATH: the default kustomize is absent, so the
		// build can only succeed through the versioned name.
		dir := t.TempDir()
		if err := os.Symlink(filepath.Join(toolsBin, "kustomize"), filepath.Join(dir, "kustomize-v5.8.2")); err != nil {
			t.Fatal(err)
		}
		inv := invocation{config: "kustomize", app: "kustomize", path: dir,
			params: []params.AppParameter{{Name: "version", String: str("v5.8.2")}, {Name: "name-prefix", String: str("v-")}}}
		if _, ok := generate(t, inv)["Deployment/v-web"]; !ok {
			t.Error("no Deployment/v-web")
		}
		inv.params = nil
		inv.action = "generate"
		refused(t, inv, "kustomize not found on PATH ("+dir+")")
	})
	t.Run("parameters", func(t *testing.T) {
		got := announcement(t, invocation{config: "kustomize", app: "kustomize"})
		if want := []string{"version", "name-prefix", "name-suffix", "images"}; !reflect.DeepEqual(announcedNames(got), want) {
			t.Errorf("announced %q, want %q", announcedNames(got), want)
		}
	})
}

func TestKustomizeHelm(t *testing.T) {
	t.Run("local chart through helmCharts", func(t *testing.T) {
		objs := generate(t, invocation{config: "kustomize-helm", app: "kustomize-helm"})
		cm, ok := objs["ConfigMap/demo-hello"]
		if !ok {
			t.Fatalf("objects = %q, want ConfigMap/demo-hello", names(objs))
		}
		want := map[string]any{"greeting": "from-kustomization", "replicas": "1", "tag": "10", "tag-kind": "string"}
		if got := cm["data"]; !reflect.DeepEqual(got, want) {
			t.Errorf("data = %v, want %v (valuesInline over the chart's values.yaml)", got, want)
		}
		if ns := field(cm, "metadata", "namespace"); ns != "apps" {
			t.Errorf("namespace = %v, want the helmCharts entry's apps", ns)
		}
	})
	t.Run("prefix and suffix", func(t *testing.T) {
		objs := generate(t, invocation{config: "kustomize-helm", app: "kustomize-helm", params: []params.AppParameter{
			{Name: "name-prefix", String: str("p-")}, {Name: "name-suffix", String: str("-s")},
		}})
		if _, ok := objs["ConfigMap/p-demo-hello-s"]; !ok {
			t.Errorf("objects = %q, want ConfigMap/p-demo-hello-s", names(objs))
		}
	})
	t.Run("hostile prefix reaches kustomize literally", func(t *testing.T) {
		objs := generate(t, invocation{config: "kustomize-helm", app: "kustomize-helm", params: []params.AppParameter{
			{Name: "name-prefix", String: str(hostile)},
		}})
		if _, ok := objs["ConfigMap/"+hostile+"demo-hello"]; !ok {
			t.Errorf("objects = %q", names(objs))
		}
	})
	t.Run("without helm on PATH the build fails with kustomize's message", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Symlink(filepath.Join(toolsBin, "kustomize"), filepath.Join(dir, "kustomize")); err != nil {
			t.Fatal(err)
		}
		refused(t, invocation{action: "generate", config: "kustomize-helm", app: "kustomize-helm", path: dir}, "(is 'helm' installed?)")
	})
}

// TestKustomizeNeedsNoShell runs both kustomize plugins, discovery included,
// with a PATH holding only what their image holds besides the plugin server:
// kustomize and helm. The image has no shell, and neither plugin needs one.
func TestKustomizeNeedsNoShell(t *testing.T) {
	dir := t.TempDir()
	for _, tool := range []string{"kustomize", "helm"} {
		if err := os.Symlink(filepath.Join(toolsBin, tool), filepath.Join(dir, tool)); err != nil {
			t.Fatal(err)
		}
	}
	for _, plugin := range []string{"kustomize", "kustomize-helm"} {
		out, stderr, err := run(t, invocation{action: "match", config: plugin, app: "kustomize-helm", path: dir})
		if err != nil || strings.TrimSpace(out) != "true" {
			t.Errorf("%s match: %q %v\n%s", plugin, out, err, stderr)
		}
	}
	objs := generate(t, invocation{config: "kustomize", app: "kustomize", path: dir, params: []params.AppParameter{
		{Name: "version", String: str("v5.8.2")}, {Name: "name-prefix", String: str("p-")},
		{Name: "images", Array: []string{"nginx:1.27"}},
	}})
	if got := containerImages(objs["Deployment/p-web"]); len(got) == 0 || got[0] != "nginx:1.27" {
		t.Errorf("objects %q, images %q", names(objs), got)
	}
	if _, ok := generate(t, invocation{config: "kustomize-helm", app: "kustomize-helm", path: dir,
		params: []params.AppParameter{{Name: "name-suffix", String: str("-s")}}})["ConfigMap/demo-hello-s"]; !ok {
		t.Error("kustomize-helm without a shell: no ConfigMap/demo-hello-s")
	}
}

// TestKustomizeHelmDiscovery: the kustomize-helm plugin takes an app whose
// kustomization file, under any name kustomize reads, has a top-level
// helmCharts key; not one where helmCharts is nested or only mentioned, and
// not one whose kustomization does not parse (the kustomize plugin then
// reports kustomize's own error).
func TestKustomizeHelmDiscovery(t *testing.T) {
	for _, tc := range []struct {
		file, content string
		want          bool
	}{
		{"kustomization.yaml", "helmCharts:\n- name: x\n", true},
		{"kustomization.yml", "resources: []\nhelmCharts: []\n", true},
		{"Kustomization", "{\"helmCharts\": [{\"name\": \"x\"}]}", true},
		{"kustomization.yaml", "resources:\n- helmCharts.yaml\n# helmCharts:\n", false},
		{"kustomization.yaml", "patches:\n- patch: |\n    helmCharts: []\n", false},
		{"kustomization.yaml", "helmCharts: [\n", false},
		{"other.yaml", "helmCharts: []\n", false},
	} {
		app := t.TempDir()
		if err := os.WriteFile(filepath.Join(app, tc.file), []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		out, stderr, err := run(t, invocation{action: "match", config: "kustomize-helm", app: app})
		if err != nil || strings.TrimSpace(out) != fmt.Sprint(tc.want) {
			t.Errorf("%s %q: match %q %v, want %v\n%s", tc.file, tc.content, out, err, tc.want, stderr)
		}
	}
}

func TestTrivialCMP(t *testing.T) {
	app := []string{"--app-name", "myapp", "--app-namespace", "ns"}
	cm := func(t *testing.T, ps []params.AppParameter) map[string]any {
		t.Helper()
		objs := generate(t, invocation{config: "trivial-cmp", app: "trivial-cmp", params: ps, args: app})
		if len(objs) != 1 {
			t.Fatalf("objects = %q, want one ConfigMap", names(objs))
		}
		for _, o := range objs {
			return o
		}
		return nil
	}
	t.Run("default suffix", func(t *testing.T) {
		obj := cm(t, nil)
		want := map[string]any{"name": "myapp-cm", "namespace": "ns"}
		if got := obj["metadata"]; obj["kind"] != "ConfigMap" || !reflect.DeepEqual(got, want) {
			t.Errorf("object = %v, want a ConfigMap with metadata %v", obj, want)
		}
	})
	t.Run("suffix parameter", func(t *testing.T) {
		if got := field(cm(t, []params.AppParameter{{Name: "cm-name-suffix", String: str("blue")}}), "metadata", "name"); got != "myapp-blue" {
			t.Errorf("name = %v, want myapp-blue", got)
		}
	})
	t.Run("a suffix that would rewrite the document is refused", func(t *testing.T) {
		for _, v := range []string{`x","namespace":"kube-system`, hostile, "UPPER"} {
			refused(t, invocation{action: "generate", config: "trivial-cmp", app: "trivial-cmp", args: app,
				params: []params.AppParameter{{Name: "cm-name-suffix", String: str(v)}}}, "invalid name part")
		}
	})
	t.Run("an app outside Argo CD's namespace is refused", func(t *testing.T) {
		refused(t, invocation{action: "generate", config: "trivial-cmp", app: "trivial-cmp",
			args: []string{"--app-name", "team_myapp"}}, "invalid name part")
	})
	t.Run("parameters", func(t *testing.T) {
		got := announcement(t, invocation{config: "trivial-cmp", app: "trivial-cmp"})
		want := []params.Announcement{{Name: "cm-name-suffix", Title: "ConfigMap Name Suffix", String: "cm"}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("announcement = %+v, want %+v", got, want)
		}
	})
}

// TestHelm runs the helm plugin's own commands: they name the plugin server at its
// sidecar path, which the server maps to itself, so the runner executes them as is.
func TestHelm(t *testing.T) {
	const config = "helm"
	chart := filepath.Join("kustomize-helm", "charts", "hello")
	t.Run("parameters", func(t *testing.T) {
		list := announcement(t, invocation{config: config, app: chart})
		maps := map[string]map[string]string{}
		for _, a := range list {
			maps[a.Name] = a.Map
		}
		want := map[string]string{"greeting": "hello", "replicas": "1", "image.tag": "10"}
		if got := maps["helm-parameters"]; !reflect.DeepEqual(got, want) {
			t.Errorf("helm-parameters = %v, want every leaf %v", got, want)
		}
		if got := maps["helm-string-parameters"]["image.tag"]; got != "10" {
			t.Errorf("helm-string-parameters[image.tag] = %q, want 10", got)
		}
		if got := maps["helm-number-parameters"]["replicas"]; got != "1" {
			t.Errorf("helm-number-parameters[replicas] = %q, want 1", got)
		}
		for _, static := range []string{"file-parameters", "release-name", "include-crds"} {
			if !slices.Contains(announcedNames(list), static) {
				t.Errorf("static parameter %s not announced", static)
			}
		}
	})
	t.Run("generate", func(t *testing.T) {
		objs := generate(t, invocation{config: config, app: chart, args: []string{"--app-name", "rel"}, params: []params.AppParameter{
			{Name: "helm-parameters", Map: map[string]string{"greeting": hostile, "image.tag": "11"}},
			{Name: "helm-string-parameters", Map: map[string]string{"image.tag": "11"}},
		}})
		cm := objs["ConfigMap/rel-hello"]
		if got := field(cm, "data", "greeting"); got != hostile {
			t.Errorf("greeting = %q, want the value literally", got)
		}
		if got := field(cm, "data", "tag-kind"); got != "string" {
			t.Errorf("image.tag kind = %v, want string: helm-string-parameters wins over helm-parameters", got)
		}
	})
}

func announcement(t *testing.T, inv invocation) []params.Announcement {
	t.Helper()
	inv.action = "parameters"
	out, stderr, err := run(t, inv)
	if err != nil {
		t.Fatalf("parameters: %v\n%s", err, stderr)
	}
	var list []params.Announcement
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("announcement %s: %v", out, err)
	}
	return list
}

func announcedNames(list []params.Announcement) []string {
	var out []string
	for _, a := range list {
		out = append(out, a.Name)
	}
	return out
}

func str(s string) *string { return &s }

// TestJsonnet runs the jsonnet plugin's own command (the plugin server's jsonnet
// subcommand) with the pinned jsonnet: each parameter kind reaches the Jsonnet
// code as the external variable or top-level argument it names.
func TestJsonnet(t *testing.T) {
	// The repository is testdata: the app's libs parameter names a sibling directory.
	inv := func(ps ...params.AppParameter) invocation {
		return invocation{config: "jsonnet", app: "jsonnet", params: ps, args: []string{"--repo-root", "testdata"}}
	}
	base := []params.AppParameter{
		{Name: "ext-vars", Map: map[string]string{"env": "prod", "greeting": hostile}},
		{Name: "libs", Array: []string{"../jsonnet-vendor"}},
	}
	t.Run("ext-vars, tlas, tla-code and libs", func(t *testing.T) {
		objs := generate(t, inv(append(base,
			params.AppParameter{Name: "tlas", Map: map[string]string{"name": "shop"}},
			params.AppParameter{Name: "tla-code", Map: map[string]string{"replicas": "1 + 2"}})...))
		if got, want := names(objs), []string{"ConfigMap/shop-prod", "Service/shop"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("objects = %q, want %q (an array nested in the result is flattened)", got, want)
		}
		want := map[string]any{"greeting": hostile, "replicas": "3", "replicas-type": "number"}
		if got := objs["ConfigMap/shop-prod"]["data"]; !reflect.DeepEqual(got, want) {
			t.Errorf("data = %v, want %v (the ext-var literally, the tla-code evaluated)", got, want)
		}
		if got := field(objs["Service/shop"], "metadata", "labels", "app.kubernetes.io/name"); got != "shop" {
			t.Errorf("label from the library = %v", got)
		}
	})
	t.Run("ext-code and the function's defaults", func(t *testing.T) {
		objs := generate(t, inv(
			params.AppParameter{Name: "ext-code", Map: map[string]string{"env": "std.asciiLower('STAGE')", "greeting": "'x' + 'y'"}},
			params.AppParameter{Name: "libs", Array: []string{"../jsonnet-vendor"}}))
		if got := field(objs["ConfigMap/web-stage"], "data", "greeting"); got != "xy" {
			t.Errorf("objects %q; greeting = %v, want xy", names(objs), got)
		}
	})
	t.Run("a tlas value is a string, tla-code a value", func(t *testing.T) {
		objs := generate(t, inv(append(base, params.AppParameter{Name: "tlas", Map: map[string]string{"replicas": "2"}})...))
		if got := field(objs["ConfigMap/web-prod"], "data", "replicas-type"); got != "string" {
			t.Errorf("replicas-type = %v, want string", got)
		}
	})
	t.Run("main names another file", func(t *testing.T) {
		objs := generate(t, invocation{config: "jsonnet", app: "jsonnet-vendor",
			params: []params.AppParameter{{Name: "main", String: str("single.jsonnet")}}})
		if got, want := names(objs), []string{"ConfigMap/single"}; !reflect.DeepEqual(got, want) {
			t.Errorf("objects = %q, want %q (one object, not an array)", got, want)
		}
	})
	t.Run("jsonnet's error reaches the user", func(t *testing.T) {
		refused(t, invocation{action: "generate", config: "jsonnet", app: "jsonnet", args: []string{"--repo-root", "testdata"},
			params: base[1:]}, "Undefined external variable: ")
	})
	t.Run("a value cannot become a jsonnet option", func(t *testing.T) {
		refused(t, invocation{action: "generate", config: "jsonnet", app: "jsonnet", args: []string{"--repo-root", "testdata"},
			params: append(base, params.AppParameter{Name: "main", String: str("--version")})}, "--version")
	})
	t.Run("a name with = is refused", func(t *testing.T) {
		refused(t, invocation{action: "generate", config: "jsonnet", app: "jsonnet", args: []string{"--repo-root", "testdata"},
			params: append(base, params.AppParameter{Name: "tlas", Map: map[string]string{"name=x": "y"}})}, "must be non-empty and hold no '='")
	})
	t.Run("parameters", func(t *testing.T) {
		got := announcement(t, invocation{config: "jsonnet", app: "jsonnet"})
		if want := []string{"main", "ext-vars", "ext-code", "tlas", "tla-code", "libs"}; !reflect.DeepEqual(announcedNames(got), want) {
			t.Errorf("announced %q, want %q", announcedNames(got), want)
		}
	})
}

// TestSops runs the sops plugin on an app encrypted at run time to a fresh age
// key (age-keygen of bin/), with a random planted value: decrypted manifests
// out, and neither the key nor the value in anything but the manifests.
func TestSops(t *testing.T) {
	key := sopstest.NewKey(t, toolsBin)
	planted := sopstest.Planted(t)
	app := t.TempDir()
	sopstest.WriteApp(t, toolsBin, app, key.Recipient, planted)
	inv := invocation{config: "sops", app: app, env: []string{"SOPS_AGE_KEY_FILE=" + key.File}}
	t.Run("encrypted files decrypted, plain ones as they are", func(t *testing.T) {
		inv := inv
		inv.args = []string{"--loglevel", "debug"}
		out, stderr, err := run(t, withAction(inv, "generate"))
		if err != nil {
			t.Fatalf("generate: %v\n%s", err, stderr)
		}
		objs := generate(t, inv)
		if got, want := names(objs), []string{"ConfigMap/settings", "Secret/db"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("objects = %q, want %q (.sops.yaml is no manifest)", got, want)
		}
		if got := field(objs["Secret/db"], "stringData", "password"); got != planted {
			t.Errorf("password = %v, want the planted value", got)
		}
		if _, ok := objs["Secret/db"]["sops"]; ok {
			t.Error("SOPS metadata left in the decrypted Secret")
		}
		sopstest.NotLeaked(t, "the runner's log at debug level", stderr, key, planted)
		sopstest.NotLeaked(t, "the manifests (the key)", out, key, "")
	})
	t.Run("a wrong key: sops's error, no secret in it", func(t *testing.T) {
		other := sopstest.NewKey(t, toolsBin)
		inv := inv
		inv.env = []string{"SOPS_AGE_KEY_FILE=" + other.File}
		_, stderr := refusedOutput(t, withAction(inv, "generate"), "sops could not decrypt secret.yaml")
		sopstest.NotLeaked(t, "the error", stderr, key, planted)
		sopstest.NotLeaked(t, "the error (the wrong key)", stderr, other, "")
	})
	t.Run("no key file", func(t *testing.T) {
		inv := inv
		inv.env = []string{"SOPS_AGE_KEY_FILE=" + filepath.Join(t.TempDir(), "missing")}
		_, stderr := refusedOutput(t, withAction(inv, "generate"), "sops could not decrypt secret.yaml")
		sopstest.NotLeaked(t, "the error", stderr, key, planted)
	})
	t.Run("discovery by .sops.yaml", func(t *testing.T) {
		out, stderr, err := run(t, invocation{action: "match", config: "sops", app: app})
		if err != nil || strings.TrimSpace(out) != "true" {
			t.Errorf("match = %q %v %s", out, err, stderr)
		}
	})
}

func withAction(inv invocation, action string) invocation {
	inv.action = action
	return inv
}

// refusedOutput is refused, returning the output and stderr for a closer look.
func refusedOutput(t *testing.T, inv invocation, want string) (string, string) {
	t.Helper()
	out, stderr, err := run(t, inv)
	if err == nil {
		t.Fatalf("%s succeeded, want it refused with %q; output:\n%s", inv.action, want, out)
	}
	if !strings.Contains(stderr, want) {
		t.Fatalf("stderr lacks %q:\n%s", want, stderr)
	}
	return out, stderr
}
