package helmplugin

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/params"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// byHandBase are the flags the build env of baseEnv stands for.
var byHandBase = []string{"template", "--namespace", "ns", "--kube-version", "1.29.3",
	"--api-versions", "example.com/v1", "--api-versions", "apps/v1"}

// TestGenerateMatchesHelmByHand checks every parameter against helm template run by
// hand with the equivalent flags.
func TestGenerateMatchesHelmByHand(t *testing.T) {
	dir := chartDir(t, "echo")
	inline := filepath.Join(t.TempDir(), "inline.yaml")
	if err := os.WriteFile(inline, []byte("x: inline\nreplicas: 7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		params []params.AppParameter
		env    map[string]string
		hand   []string // after byHandBase, unless full is set
		full   []string
	}{
		{name: "no parameters", hand: []string{"--include-crds", "myapp", "."}},
		{name: "values-files", params: []params.AppParameter{{Name: "values-files", Array: []string{"values-prod.yaml", "values-extra.yml"}}},
			hand: []string{"--values", "values-prod.yaml", "-f", "values-extra.yml", "--include-crds", "myapp", "."}},
		{name: "values", params: []params.AppParameter{{Name: "values", String: str("x: inline\nreplicas: 7\n")}},
			hand: []string{"--values", inline, "--include-crds", "myapp", "."}},
		{name: "values after values-files", params: []params.AppParameter{
			{Name: "values", String: str("x: inline\nreplicas: 7\n")},
			{Name: "values-files", Array: []string{"values-prod.yaml"}}},
			hand: []string{"-f", "values-prod.yaml", "-f", inline, "--include-crds", "myapp", "."}},
		{name: "helm-parameters", params: []params.AppParameter{{Name: "helm-parameters", Map: map[string]string{"image.tag": "2.0", "replicas": "5", "list[1].name": "b"}}},
			hand: []string{"--set", "image.tag=2.0", "--set", "replicas=5", "--set", "list[1].name=b", "--include-crds", "myapp", "."}},
		{name: "helm-string-parameters", params: []params.AppParameter{{Name: "helm-string-parameters", Map: map[string]string{"replicas": "5", "x": "true"}}},
			hand: []string{"--set-string", "replicas=5", "--set-string", "x=true", "--include-crds", "myapp", "."}},
		{name: "typed parameters", params: []params.AppParameter{
			{Name: "helm-number-parameters", Map: map[string]string{"replicas": "4.5", "gone": ""}},
			{Name: "helm-boolean-parameters", Map: map[string]string{"flag": "true"}}},
			hand: []string{"--set-json", "replicas=4.5", "--set-json", "gone=null", "--set-json", "flag=true", "--include-crds", "myapp", "."}},
		// helm would apply --set-json first and let --set win; the plugin passes each key
		// once, from the map that wins, so the typed value is what helm sees.
		{name: "typed and string maps win over helm-parameters", params: []params.AppParameter{
			{Name: "helm-parameters", Map: map[string]string{"replicas": "5", "image.tag": "3", "x": "plain", `k\=v`: "set", "flag": "false"}},
			{Name: "helm-string-parameters", Map: map[string]string{"image.tag": "3", "k=v": "string"}},
			{Name: "helm-number-parameters", Map: map[string]string{"replicas": "4.5"}},
			{Name: "helm-boolean-parameters", Map: map[string]string{"flag": "true"}}},
			hand: []string{"--set", "x=plain", "--set-string", "image.tag=3", "--set-string", `k\=v=string`,
				"--set-json", "replicas=4.5", "--set-json", "flag=true", "--include-crds", "myapp", "."}},
		{name: "file-parameters", params: []params.AppParameter{{Name: "file-parameters", Map: map[string]string{"x": "files/banner.txt"}}},
			hand: []string{"--set-file", "x=files/banner.txt", "--include-crds", "myapp", "."}},
		{name: "release-name", params: []params.AppParameter{{Name: "release-name", String: str("other")}},
			hand: []string{"--include-crds", "other", "."}},
		{name: "release name from a namespaced app", env: map[string]string{"ARGOCD_APP_NAME": "team-a_myapp"},
			hand: []string{"--include-crds", "myapp", "."}},
		{name: "namespace", params: []params.AppParameter{{Name: "namespace", String: str("elsewhere")}},
			full: []string{"template", "--namespace", "elsewhere", "--kube-version", "1.29.3", "--api-versions", "example.com/v1",
				"--api-versions", "apps/v1", "--include-crds", "myapp", "."}},
		{name: "kube-version and api-versions", params: []params.AppParameter{
			{Name: "kube-version", String: str("1.31.0")},
			{Name: "api-versions", String: str("example.com/v2, foo/v1")}},
			full: []string{"template", "--namespace", "ns", "--kube-version", "1.31.0", "--api-versions", "example.com/v2",
				"--api-versions", "foo/v1", "--include-crds", "myapp", "."}},
		{name: "api-versions as array", params: []params.AppParameter{{Name: "api-versions", Array: []string{"example.com/v2"}}},
			full: []string{"template", "--namespace", "ns", "--kube-version", "1.29.3", "--api-versions", "example.com/v2",
				"--include-crds", "myapp", "."}},
		{name: "no build env", env: map[string]string{"KUBE_VERSION": "", "KUBE_API_VERSIONS": "", "ARGOCD_APP_NAMESPACE": ""},
			full: []string{"template", "--include-crds", "myapp", "."}},
		{name: "skip-crds", params: []params.AppParameter{{Name: "skip-crds", String: str("true")}},
			hand: []string{"--skip-crds", "myapp", "."}},
		{name: "include-crds false", params: []params.AppParameter{{Name: "include-crds", String: str("false")}},
			hand: []string{"myapp", "."}},
		{name: "skip-tests", params: []params.AppParameter{{Name: "skip-tests", String: str("true")}},
			hand: []string{"--include-crds", "--skip-tests", "myapp", "."}},
		{name: "skip-schema-validation", params: []params.AppParameter{{Name: "skip-schema-validation", String: str("true")}},
			hand: []string{"--include-crds", "--skip-schema-validation", "myapp", "."}},
		{name: "ignore-missing-value-files", params: []params.AppParameter{
			{Name: "ignore-missing-value-files", String: str("true")},
			{Name: "values-files", Array: []string{"missing.yaml", "values-prod.yaml"}}},
			hand: []string{"-f", "values-prod.yaml", "--include-crds", "myapp", "."}},
		{name: "pass-credentials", params: []params.AppParameter{{Name: "pass-credentials", String: str("true")}},
			hand: []string{"--include-crds", "--pass-credentials", "myapp", "."}},
		{name: "false booleans", params: []params.AppParameter{
			{Name: "skip-crds", String: str("false")}, {Name: "skip-tests", String: str("FALSE")}},
			hand: []string{"--include-crds", "myapp", "."}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := baseEnv(t)
			for k, v := range tc.env {
				env[k] = v
			}
			env = withParams(t, env, tc.params)
			got, stderr, err := runPlugin(t, generateManifests, dir, "", env)
			if err != nil {
				t.Fatalf("generate: %v (stderr %s)", err, stderr)
			}
			args := tc.full
			if args == nil {
				args = append(append([]string{}, byHandBase...), tc.hand...)
			}
			if want := helmByHand(t, dir, env, args...); got != want {
				t.Errorf("output differs from helm %q\n--- plugin\n%s\n--- by hand\n%s", args, got, want)
			}
			if strings.Contains(stderr, "warning") && tc.name != "ignore-missing-value-files" {
				t.Errorf("unexpected warning: %s", stderr)
			}
		})
	}
}

// hostileValues must reach helm byte for byte.
var hostileValues = []string{
	"", " lead and trail ", `"double" and 'single'`, "$(touch /tmp/pwned)", "`id`", "${HOME}", "a,b,c",
	`a\,b`, `\`, `trailing\`, `\\`, "x=y=z", "=", "line1\nline2\n", "{a,b}", "{", "}", "[0]", "a.b[0].c",
	"tab\there", "unicode ✓ ü 日本", "--set=evil", "-f", "%s%d", "; rm -rf / #", "| cat /etc/passwd", "'", `"`,
	"true", "null", "0", "0123", "42", "1e3",
}

// renderedValues extracts .Values as the echo chart rendered it.
func renderedValues(t *testing.T, manifests string) map[string]any {
	t.Helper()
	for _, doc := range strings.Split(manifests, "\n---\n") {
		var cm struct {
			Kind string            `json:"kind"`
			Data map[string]string `json:"data"`
		}
		if err := yaml.Unmarshal([]byte(doc), &cm); err != nil || cm.Kind != "ConfigMap" {
			continue
		}
		var vals map[string]any
		if err := json.Unmarshal([]byte(cm.Data["values.json"]), &vals); err != nil {
			t.Fatalf("values.json: %v", err)
		}
		return vals
	}
	t.Fatalf("no ConfigMap in output:\n%s", manifests)
	return nil
}

func TestHostileValuesReachHelmLiterally(t *testing.T) {
	dir := chartDir(t, "echo")
	strs := map[string]string{}
	sets := map[string]string{}
	for i, v := range hostileValues {
		k := "k" + string(rune('a'+i/26)) + string(rune('a'+i%26))
		strs[k] = v
		if !retypedBySet(v) {
			sets[k] = v
		}
	}
	for _, param := range []struct {
		name string
		m    map[string]string
	}{{"helm-string-parameters", strs}, {"helm-parameters", sets}} {
		t.Run(param.name, func(t *testing.T) {
			env := withParams(t, baseEnv(t), []params.AppParameter{{Name: param.name, Map: param.m}})
			out, stderr, err := runPlugin(t, generateManifests, dir, "", env)
			if err != nil {
				t.Fatalf("generate: %v (stderr %s)", err, stderr)
			}
			vals := renderedValues(t, out)
			for k, want := range param.m {
				if got, ok := vals[k].(string); !ok || got != want {
					t.Errorf("%s: helm saw %#v, want %q", k, vals[k], want)
				}
			}
		})
	}
	t.Run("x rendered with quote", func(t *testing.T) {
		for _, v := range []string{"$(id) \"q\" 'q', a=b\nnext", `\,{}[].=`} {
			env := withParams(t, baseEnv(t), []params.AppParameter{{Name: "helm-string-parameters", Map: map[string]string{"x": v}}})
			out, _, err := runPlugin(t, generateManifests, dir, "", env)
			if err != nil {
				t.Fatal(err)
			}
			var data map[string]any
			for _, doc := range strings.Split(out, "\n---\n") {
				if strings.Contains(doc, "kind: ConfigMap") {
					if err := yaml.Unmarshal([]byte(doc), &data); err != nil {
						t.Fatal(err)
					}
				}
			}
			if got := data["data"].(map[string]any)["x"]; got != v {
				t.Errorf("{{ .Values.x | quote }} rendered %q, want %q", got, v)
			}
		}
	})
}

func TestHostileKeys(t *testing.T) {
	dir := chartDir(t, "echo")
	env := withParams(t, baseEnv(t), []params.AppParameter{{Name: "helm-string-parameters", Map: map[string]string{
		`annotations.prometheus\.io/scrape`: "yes",
		`sp ace.k=v,w`:                      "eq",
		`lst[1].n`:                          "second",
		`back\\slash`:                       "bs",
		`esc\[0\]`:                          "brackets",
	}}})
	out, stderr, err := runPlugin(t, generateManifests, dir, "", env)
	if err != nil {
		t.Fatalf("generate: %v (stderr %s)", err, stderr)
	}
	vals := renderedValues(t, out)
	want := map[string]any{
		"annotations": map[string]any{"prometheus.io/scrape": "yes"},
		"sp ace":      map[string]any{"k=v,w": "eq"},
		"lst":         []any{nil, map[string]any{"n": "second"}},
		`back\slash`:  "bs",
		"esc[0]":      "brackets",
	}
	for k, w := range want {
		g, _ := json.Marshal(vals[k])
		e, _ := json.Marshal(w)
		if string(g) != string(e) {
			t.Errorf("%q: helm saw %s, want %s", k, g, e)
		}
	}
}

func TestGenerateRefusesPathsOutsideTheRepository(t *testing.T) {
	tmp := t.TempDir()
	repo := filepath.Join(tmp, "repo")
	app := filepath.Join(repo, "apps", "echo")
	copyTree(t, chartDir(t, "echo"), app)
	outside := filepath.Join(tmp, "secret.yaml")
	if err := os.WriteFile(outside, []byte("x: secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(app, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(tmp, filepath.Join(app, "linkdir")); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(repo, "shared.yaml")
	if err := os.WriteFile(shared, []byte("x: shared\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	refused := []struct {
		name  string
		param params.AppParameter
		root  string
		want  string
	}{
		{"dotdot past the root", params.AppParameter{Name: "values-files", Array: []string{"../../../secret.yaml"}}, repo, "outside the repository"},
		{"dotdot past the app dir without a root", params.AppParameter{Name: "values-files", Array: []string{"../../shared.yaml"}}, "", "outside the repository"},
		{"absolute", params.AppParameter{Name: "values-files", Array: []string{"/etc/passwd"}}, repo, "outside the repository"},
		{"symlinked file", params.AppParameter{Name: "values-files", Array: []string{"link.yaml"}}, repo, "symlink to"},
		{"symlinked dir", params.AppParameter{Name: "values-files", Array: []string{"linkdir/secret.yaml"}}, repo, "symlink to"},
		{"remote", params.AppParameter{Name: "values-files", Array: []string{"https://example.com/v.yaml"}}, repo, "remote files are not supported"},
		{"set-file dotdot", params.AppParameter{Name: "file-parameters", Map: map[string]string{"x": "../../../secret.yaml"}}, repo, "outside the repository"},
		{"set-file absolute", params.AppParameter{Name: "file-parameters", Map: map[string]string{"x": outside}}, repo, "outside the repository"},
		{"set-file symlink", params.AppParameter{Name: "file-parameters", Map: map[string]string{"x": "link.yaml"}}, repo, "symlink to"},
		{"missing", params.AppParameter{Name: "values-files", Array: []string{"nope.yaml"}}, repo, "does not exist"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			env := withParams(t, baseEnv(t), []params.AppParameter{tc.param})
			out, _, err := runPlugin(t, generateManifests, app, tc.root, env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
			if strings.Contains(out, "secret") {
				t.Fatalf("output leaked the outside file: %s", out)
			}
		})
	}
	t.Run("symlink in the chart", func(t *testing.T) {
		_, _, err := runPlugin(t, generateManifests, app, repo, baseEnv(t))
		if err == nil || !strings.Contains(err.Error(), "is a symlink to") {
			t.Fatalf("error = %v, want the chart's outside symlink refused", err)
		}
	})
	t.Run("inside the repository, above the app dir", func(t *testing.T) {
		app := filepath.Join(repo, "apps", "clean")
		copyTree(t, chartDir(t, "echo"), app)
		if err := os.Symlink("values-prod.yaml", filepath.Join(app, "inside-link.yaml")); err != nil {
			t.Fatal(err)
		}
		for _, how := range []string{"flag", "env", "source path"} {
			env := withParams(t, baseEnv(t), []params.AppParameter{{Name: "values-files", Array: []string{"../../shared.yaml"}}})
			root := ""
			switch how {
			case "flag":
				root = repo
			case "env":
				env[envRepoRoot] = repo
			case "source path":
				env["ARGOCD_APP_SOURCE_PATH"] = "apps/clean"
			}
			out, stderr, err := runPlugin(t, generateManifests, app, root, env)
			if err != nil {
				t.Fatalf("%s: generate: %v (%s)", how, err, stderr)
			}
			if got := renderedValues(t, out)["x"]; got != "shared" {
				t.Fatalf("x = %v, want shared", got)
			}
		}
	})
}

func TestGenerateErrors(t *testing.T) {
	echo := chartDir(t, "echo")
	t.Run("broken chart returns helm's message", func(t *testing.T) {
		_, _, err := runPlugin(t, generateManifests, chartDir(t, "broken"), "", baseEnv(t))
		var exit *serving.ExitError
		if !errors.As(err, &exit) || exit.Code == 0 {
			t.Fatalf("error = %#v, want a *serving.ExitError with helm's exit code", err)
		}
		if !strings.Contains(err.Error(), "parse error at (broken/templates/bad.yaml:5)") {
			t.Fatalf("error text %q lacks helm's message", err)
		}
	})
	bad := []struct {
		name string
		ps   []params.AppParameter
		want string
	}{
		{"release name that looks like a flag", []params.AppParameter{{Name: "release-name", String: str("--post-renderer=/bin/sh")}}, "invalid release name"},
		{"map given as a string", []params.AppParameter{{Name: "helm-parameters", String: str("a=b")}}, `parameter "helm-parameters" must be given as a map (got string)`},
		{"bad boolean", []params.AppParameter{{Name: "skip-crds", String: str("yes")}}, `must be "true" or "false"`},
		{"conflicting crd flags", []params.AppParameter{{Name: "skip-crds", String: str("true")}, {Name: "include-crds", String: str("true")}}, "both true"},
		{"number that is not", []params.AppParameter{{Name: "helm-number-parameters", Map: map[string]string{"replicas": "three"}}}, "not of the announced type"},
		{"one key with two types", []params.AppParameter{
			{Name: "helm-number-parameters", Map: map[string]string{"a.b": "1"}},
			{Name: "helm-boolean-parameters", Map: map[string]string{`a.b`: "true"}}}, "is in both helm-number-parameters and helm-boolean-parameters"},
		{"bad key", []params.AppParameter{{Name: "helm-parameters", Map: map[string]string{"a..b": "x"}}}, "empty name"},
		{"NUL byte", []params.AppParameter{{Name: "helm-parameters", Map: map[string]string{"x": "a\x00b"}}}, "NUL byte"},
		{"unnamed parameter", []params.AppParameter{{String: str("x")}}, "name is required"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runPlugin(t, generateManifests, echo, "", withParams(t, baseEnv(t), tc.ps))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	t.Run("helm missing from PATH", func(t *testing.T) {
		env := baseEnv(t)
		env["PATH"] = t.TempDir()
		_, _, err := runPlugin(t, generateManifests, echo, "", env)
		if err == nil || !strings.Contains(err.Error(), "helm not found on PATH") {
			t.Fatalf("error = %v", err)
		}
	})
	t.Run("unknown parameters only warn", func(t *testing.T) {
		env := withParams(t, baseEnv(t), []params.AppParameter{{Name: "colour", String: str("blue")}})
		_, stderr, err := runPlugin(t, generateManifests, echo, "", env)
		if err != nil || !strings.Contains(stderr, `warning: ignoring unknown parameter "colour"`) {
			t.Fatalf("err = %v, stderr = %q", err, stderr)
		}
	})
	t.Run("inline values file is removed", func(t *testing.T) {
		env := withParams(t, baseEnv(t), []params.AppParameter{{Name: "values", String: str("x: y\n")}})
		if _, _, err := runPlugin(t, generateManifests, echo, "", env); err != nil {
			t.Fatal(err)
		}
		left, _ := os.ReadDir(env["TMPDIR"])
		if len(left) != 0 {
			t.Fatalf("temporary files left behind: %v", left)
		}
	})
}

func TestRootFromSourcePath(t *testing.T) {
	cases := []struct{ app, src, want string }{
		{"/w/uuid/charts/echo", "charts/echo", "/w/uuid"},
		{"/w/uuid/charts/echo", "/charts/echo/", "/w/uuid"},
		{"/w/uuid/charts/echo", "echo", "/w/uuid/charts"},
		{"/w/uuid/charts/echo", "ho", ""},
		{"/w/uuid/charts/echo", ".", ""},
		{"/w/uuid/charts/echo", "", ""},
		{"/w/uuid/charts/echo", "../echo", ""},
		{"/w/uuid/charts/echo", "x/../charts/echo", "/w/uuid"},
	}
	for _, c := range cases {
		if got := rootFromSourcePath(c.app, c.src); got != c.want {
			t.Errorf("rootFromSourcePath(%q, %q) = %q, want %q", c.app, c.src, got, c.want)
		}
	}
}
