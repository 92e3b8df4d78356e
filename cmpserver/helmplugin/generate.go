package helmplugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/cmp-injector/cmp-injector/cmpserver/toolrun"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// helmRequest is one plugin command invocation with its inputs made explicit.
type helmRequest struct {
	// Env is the plugin env (build env, ARGOCD_APP_PARAMETERS, PARAM_*, PATH, ...).
	Env map[string]string
	// AppDir is the chart directory; helm runs there.
	AppDir string
	// RepoRoot bounds every path a parameter names; empty means Env[CMP_REPO_ROOT],
	// then the root implied by ARGOCD_APP_SOURCE_PATH, then AppDir.
	RepoRoot string
	Stdout   io.Writer
	Stderr   io.Writer
}

func (r *helmRequest) boundary() (*boundary, error) {
	root := r.RepoRoot
	if root == "" {
		root = r.Env[envRepoRoot]
	}
	if root == "" {
		root = rootFromSourcePath(r.AppDir, r.Env[keys.EnvAppSourcePath])
	}
	return newBoundary(r.AppDir, root)
}

// prepare parses the parameters and fixes the repository boundary, what
// both actions start with.
func (r *helmRequest) prepare() (*helmOptions, *boundary, error) {
	opts, err := parseOptions(r.Env, r.Stderr)
	if err != nil {
		return nil, nil, err
	}
	b, err := r.boundary()
	if err != nil {
		return nil, nil, err
	}
	return opts, b, nil
}

// generateManifests renders the chart in r.AppDir with `helm template`, writing the manifests
// to r.Stdout. Warnings, including helm's on success, go to r.Stderr.
func generateManifests(ctx context.Context, r helmRequest) error {
	// Said first: outside a chart every later check (values files, symlinks
	// in what would be the chart) only confuses.
	if _, err := os.Stat(filepath.Join(r.AppDir, "Chart.yaml")); err != nil {
		return fmt.Errorf("no Chart.yaml in %s: cmp-server helm generate runs in a chart's directory, the Application's source path", r.AppDir)
	}
	opts, b, err := r.prepare()
	if err != nil {
		return err
	}
	// Looked up before the arguments are built, so a sidecar without helm
	// says so whatever its parameters.
	env := envList(r.Env)
	if _, err := toolrun.Find("helm", env); err != nil {
		return err
	}
	tmp := tempDir(r.Env)
	args, cleanup, err := templateArgs(opts, b, tmp, r.Stderr)
	defer cleanup()
	if err != nil {
		return err
	}
	if err := b.checkSymlinks(); err != nil {
		return err
	}
	// helm's message is the error text the user sees, unprefixed, and its
	// exit code is cmp-server's.
	stderr, err := toolrun.Stream(ctx, "helm", args, r.AppDir, env, r.Stdout, func(msg string) string { return msg })
	if err != nil {
		return err
	}
	if msg := bytes.TrimSpace(stderr); len(msg) > 0 {
		fmt.Fprintf(r.Stderr, "%s\n", msg)
	}
	return nil
}

// templateArgs builds `helm template` arguments. Every flag is written as one
// `--flag=value` argument and the positional arguments follow `--`, so no parameter
// value can be read as another flag. cleanup removes the inline values file.
func templateArgs(o *helmOptions, b *boundary, tmpDir string, warn io.Writer) (args []string, cleanup func(), err error) {
	cleanup = func() {}
	args = []string{"template"}
	flag := func(name, value string) { args = append(args, "--"+name+"="+value) }
	if o.Namespace != "" {
		flag("namespace", o.Namespace)
	}
	if o.KubeVersion != "" {
		flag("kube-version", o.KubeVersion)
	}
	for _, v := range o.APIVersions {
		flag("api-versions", v)
	}
	for _, f := range o.ValuesFiles {
		path, err := b.resolve("values file", f)
		if errors.Is(err, errMissing) && o.IgnoreMissing {
			fmt.Fprintf(warn, "warning: skipping missing values file %q (%s=true)\n", f, paramIgnoreMissingValues)
			continue
		}
		if err != nil {
			return nil, cleanup, err
		}
		flag("values", path)
	}
	if o.HasValues && o.Values != "" {
		path, err := writeTemp(tmpDir, o.Values)
		if err != nil {
			return nil, cleanup, err
		}
		cleanup = func() { os.Remove(path) }
		flag("values", path)
	}
	sets, err := valueFlags(o)
	if err != nil {
		return nil, cleanup, err
	}
	args = append(args, sets...)
	for _, k := range slices.Sorted(maps.Keys(o.SetFile)) {
		path, err := b.resolve("file parameter "+k, o.SetFile[k])
		if err != nil {
			return nil, cleanup, err
		}
		arg, err := setArg(k, path)
		if err != nil {
			return nil, cleanup, fmt.Errorf("parameter %q: %w", paramFileParameters, err)
		}
		flag("set-file", arg)
	}
	if o.IncludeCRDs {
		args = append(args, "--include-crds")
	}
	if o.SkipCRDs {
		args = append(args, "--skip-crds")
	}
	if o.SkipTests {
		args = append(args, "--skip-tests")
	}
	if o.SkipSchema {
		args = append(args, "--skip-schema-validation")
	}
	if o.PassCreds {
		args = append(args, "--pass-credentials")
	}
	args = append(args, "--")
	if o.ReleaseName != "" {
		args = append(args, o.ReleaseName)
	}
	args = append(args, ".")
	for _, a := range args {
		if strings.ContainsRune(a, 0) {
			return nil, cleanup, fmt.Errorf("argument %q contains a NUL byte, which no process argument can carry", a)
		}
	}
	return args, cleanup, nil
}

func writeTemp(dir, content string) (string, error) {
	f, err := os.CreateTemp(dir, "helm-values-*.yaml")
	if err != nil {
		return "", fmt.Errorf("writing the %s parameter to a temporary file: %w", paramValues, err)
	}
	_, werr := f.WriteString(content)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("writing the %s parameter to a temporary file: %w", paramValues, err)
	}
	return f.Name(), nil
}

func tempDir(env map[string]string) string {
	if d := env["TMPDIR"]; d != "" {
		return d
	}
	return os.TempDir()
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// valueSource is one map parameter of values and the helm flag that applies it.
type valueSource struct {
	flag, param string
	m           map[string]string
}

// valueFlags turns the value maps into --set, --set-string and --set-json arguments.
//
// A key may be given in several maps: the announcement lists every leaf in
// helm-parameters and the typed ones again in their own map. Precedence is
// helm-parameters (--set), then helm-string-parameters (--set-string), then
// helm-number-parameters and helm-boolean-parameters (--set-json): the later wins, so
// an explicit type is never lost to --set's guessing. helm itself cannot be left to
// decide, since it applies these flags by kind, not by position: every --set-json
// before every --set, whatever the order on the command line. So each key is passed
// once, from the map that wins; keys are compared in canonical --set syntax.
func valueFlags(o *helmOptions) ([]string, error) {
	sources := []valueSource{
		{"set", paramHelmParameters, o.Set},
		{"set-string", paramHelmStringParameters, o.SetString},
		{"set-json", paramHelmNumberParameters, o.SetNumber},
		{"set-json", paramHelmBoolParameters, o.SetBool},
	}
	parsed := make([]map[string]string, len(sources)) // user key -> canonical key
	winner := map[string]int{}                        // canonical key -> source index
	for i, s := range sources {
		parsed[i] = make(map[string]string, len(s.m))
		for _, k := range slices.Sorted(maps.Keys(s.m)) {
			p, err := parseSetPath(k)
			if err != nil {
				return nil, fmt.Errorf("parameter %q: %w", s.param, err)
			}
			canon := p.String()
			if prev, ok := winner[canon]; ok && prev != i && sources[prev].flag == "set-json" {
				return nil, fmt.Errorf("key %q is in both %s and %s; give it one type", k, sources[prev].param, s.param)
			}
			parsed[i][k] = canon
			winner[canon] = i
		}
	}
	var args []string
	for i, s := range sources {
		for _, k := range slices.Sorted(maps.Keys(s.m)) {
			canon := parsed[i][k]
			if winner[canon] != i {
				continue // a later map sets this key
			}
			v := escapeSetValue(s.m[k])
			if s.flag == "set-json" {
				v = jsonScalar(s.m[k])
			}
			args = append(args, "--"+s.flag+"="+canon+"="+v)
		}
	}
	return args, nil
}

// jsonScalar is a validated number or boolean parameter as --set-json reads it; an
// empty value is null.
func jsonScalar(v string) string {
	if v == "" {
		return "null"
	}
	return v
}
