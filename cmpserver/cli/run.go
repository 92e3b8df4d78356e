package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/cmpserver/local"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/params"
	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// appFlags are the repository and Application facts that run and call turn into
// the env a repo-server would send.
type appFlags struct {
	appDir, repoRoot, paramsFile string
	env                          multiFlag
	app                          client.App
	apiVersions                  string
	noPlugin                     bool
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func (a *appFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.appDir, "app-dir", ".", "the Application's directory (spec.source.path)")
	fs.StringVar(&a.repoRoot, "repo-root", "", "root of the repository to send (default: --app-dir)")
	fs.StringVar(&a.paramsFile, "parameters", "", "YAML or JSON list of spec.source.plugin.parameters ({name, string|array|map})")
	fs.Var(&a.env, "env", "NAME=VALUE of spec.source.plugin.env, sent as ARGOCD_ENV_NAME (repeatable)")
	fs.StringVar(&a.app.Name, "app-name", "", keys.EnvAppName+" (default: base name of --app-dir)")
	fs.StringVar(&a.app.Namespace, "app-namespace", "default", keys.EnvAppNamespace+", the destination namespace")
	fs.StringVar(&a.app.Project, "project", "default", keys.EnvAppProjectName)
	fs.StringVar(&a.app.Revision, "revision", "0000000000000000000000000000000000000000", keys.EnvAppRevision)
	fs.StringVar(&a.app.RepoURL, "repo-url", "", keys.EnvAppSourceRepoURL)
	fs.StringVar(&a.app.TargetRevision, "target-revision", "HEAD", keys.EnvAppSourceTargetRevision)
	fs.StringVar(&a.app.KubeVersion, "kube-version", "", keys.EnvKubeVersion+", e.g. 1.34.0")
	fs.StringVar(&a.apiVersions, "kube-api-versions", "", keys.EnvKubeAPIVersions+", comma separated")
	fs.BoolVar(&a.noPlugin, "no-plugin-source", false, "omit ARGOCD_APP_PARAMETERS, as for an Application without spec.source.plugin")
}

// request resolves the flags into a repo root, app path and the env the
// repo-server sends for action: the smaller one for a parameters
// announcement, as Argo CD does (no namespace, revision or KUBE_* there).
func (a *appFlags) request(action string) (root, appRel string, env []string, err error) {
	root, appRel, app, err := a.resolve()
	if err != nil {
		return "", "", nil, err
	}
	if action == "parameters" {
		env, err = app.ParametersEnviron()
	} else {
		env, err = app.Environ()
	}
	return root, appRel, env, err
}

// resolve turns the flags into a repo root, app path and the Application.
func (a *appFlags) resolve() (root, appRel string, app client.App, err error) {
	appDir, err := filepath.Abs(a.appDir)
	if err != nil {
		return "", "", app, err
	}
	root = appDir
	if a.repoRoot != "" {
		if root, err = filepath.Abs(a.repoRoot); err != nil {
			return "", "", app, err
		}
	}
	appRel, err = filepath.Rel(root, appDir)
	if err != nil || appRel == ".." || strings.HasPrefix(appRel, "../") {
		return "", "", app, fmt.Errorf("--app-dir %s is not inside --repo-root %s", appDir, root)
	}
	app = a.app
	if app.Name == "" {
		app.Name = filepath.Base(appDir)
	}
	app.SourcePath = appRel
	if a.apiVersions != "" {
		app.KubeAPIVersions = strings.Split(a.apiVersions, ",")
	}
	app.PluginEnv = a.env
	app.HasPlugin = !a.noPlugin
	if a.paramsFile != "" {
		if app.Parameters, err = readParameters(a.paramsFile); err != nil {
			return "", "", app, err
		}
	}
	return root, appRel, app, nil
}

func readParameters(path string) ([]params.AppParameter, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ps, err := params.Decode(js)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ps, nil
}

// runCommand executes a plugin.yaml locally: cmp-server run generate|parameters|match.
// With --watch it runs again whenever the plugin.yaml or the repository
// changes, until interrupted.
func runCommand(ctx context.Context, args []string, stdio serving.IO) error {
	fs := serving.NewFlagSet("cmp-server run", "generate|parameters|match --config FILE --app-dir DIR [flags]")
	config := fs.String("config", "plugin.yaml", "the plugin.yaml to run")
	watch := fs.Bool("watch", false, "run again whenever the plugin.yaml or a file under --repo-root (else --app-dir) changes, until interrupted")
	interval := fs.Duration("watch-interval", 500*time.Millisecond, "with --watch: how often files are checked for changes")
	var a appFlags
	a.register(fs.FlagSet)
	var req local.Request
	limitFlags(fs.FlagSet, &req.Limits)
	if err := execFlags(fs.FlagSet, &req.Exec); err != nil {
		return fs.Errorf("%v", err)
	}
	level, format := logFlags(fs.FlagSet)
	action, err := fs.ParseAction(args)
	if err != nil {
		return err
	}
	var do func(context.Context, local.Request) (any, error)
	switch action {
	case "generate":
		do = func(ctx context.Context, r local.Request) (any, error) {
			return local.Generate(ctx, r)
		}
	case "parameters":
		do = func(ctx context.Context, r local.Request) (any, error) {
			return local.Parameters(ctx, r)
		}
	case "match":
		do = func(ctx context.Context, r local.Request) (any, error) { return local.Match(ctx, r) }
	default:
		return fs.Errorf("unknown action %q: want generate, parameters or match", action)
	}
	if *watch && *interval <= 0 {
		return fs.Errorf("--watch-interval must be positive")
	}
	log, err := newLogger(level, format, stdio.Stderr)
	if err != nil {
		return fs.Errorf("%v", err)
	}
	root, appRel, env, err := a.request(action)
	if err != nil {
		return err
	}
	req.BaseEnv = os.Environ()
	req.RepoRoot, req.AppRelPath, req.Env, req.Logger = root, appRel, env, log
	req.LogLevel, req.LogFormat = *level, *format
	once := func(ctx context.Context) error {
		plugin, warnings, err := pluginconfig.Load(*config)
		for _, w := range warnings {
			fmt.Fprintln(stdio.Stderr, "warning:", w)
		}
		if err != nil {
			return err
		}
		req.Plugin = plugin
		out, err := do(ctx, req)
		if err != nil {
			return err
		}
		return printResult(stdio.Stdout, out)
	}
	if !*watch {
		return once(ctx)
	}
	watchRuns(ctx, *interval, *config, root, stdio.Stderr, once)
	return nil
}

// watchRuns calls once at start and after every change of the config file or
// the repository tree, until SIGINT or SIGTERM. A failed run is reported and
// the watch goes on: the author is mid-edit.
func watchRuns(ctx context.Context, interval time.Duration, config, root string, stderr io.Writer, once func(context.Context) error) {
	ctx, stop := serving.ShutdownContext(ctx)
	defer stop()
	runs := 0
	p := &serving.Poller{
		Interval:    interval,
		Fingerprint: serving.Combine(serving.FileHash(config), serving.TreeStat(root, ".git")),
		OnChange: func(_ string, err error) {
			if err != nil {
				fmt.Fprintf(stderr, "--- watch: %v (waiting for the next change)\n", err)
				return
			}
			if runs > 0 {
				fmt.Fprintf(stderr, "--- %s: change seen, running again\n", time.Now().Format(time.TimeOnly))
			}
			runs++
			result := "ok"
			if err := once(ctx); err != nil {
				fmt.Fprintln(stderr, err)
				result = "failed"
			}
			fmt.Fprintf(stderr, "--- %s; watching %s and %s (Ctrl-C to stop)\n", result, config, root)
		},
	}
	p.Check()
	p.Run(ctx)
}

// callCommand drives a running server over its socket like a repo-server.
func callCommand(ctx context.Context, args []string, stdio serving.IO) error {
	fs := serving.NewFlagSet("cmp-server call", "--socket PATH generate|parameters|match|check [flags]")
	socket := fs.String("socket", "", "the plugin's unix socket")
	timeout := fs.Duration("timeout", 60*time.Second, "request deadline, sent to the server as grpc-timeout")
	var a appFlags
	a.register(fs.FlagSet)
	action, err := fs.ParseAction(args)
	if err != nil {
		return err
	}
	switch {
	case *socket == "":
		return fs.Errorf("--socket is required")
	case action == "":
		return fs.Errorf("an action is required: generate, parameters, match or check")
	case action != "generate" && action != "parameters" && action != "match" && action != "check":
		return fs.Errorf("unknown action %q: want generate, parameters, match or check", action)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	// A missing socket or one nobody listens on is known at once; gRPC would
	// retry it until the deadline.
	if err := dialable(ctx, *socket); err != nil {
		return err
	}
	c, err := client.Dial(ctx, *socket)
	if err != nil {
		return err
	}
	defer c.Close()
	if action == "check" {
		res, err := c.Check(ctx)
		if err != nil {
			return err
		}
		return printResult(stdio.Stdout, res)
	}
	root, appRel, env, err := a.request(action)
	if err != nil {
		return err
	}
	req := client.Request{RepoRoot: root, AppRelPath: appRel, Env: env}
	var out any
	switch action {
	case "generate":
		out, err = c.Generate(ctx, req)
	case "parameters":
		out, err = c.Parameters(ctx, req)
	case "match":
		var res client.MatchResult
		res, err = c.Match(ctx, req)
		out = res.Supported
	}
	if err != nil {
		return err
	}
	return printResult(stdio.Stdout, out)
}

// printResult prints manifests as a YAML stream, booleans as true/false and
// anything else as indented JSON.
func printResult(stdout io.Writer, out any) error {
	switch v := out.(type) {
	case []string:
		for i, m := range v {
			doc, err := yaml.JSONToYAML([]byte(m))
			if err != nil {
				return err
			}
			if i > 0 {
				fmt.Fprintln(stdout, "---")
			}
			fmt.Fprint(stdout, string(doc))
		}
	case bool:
		fmt.Fprintln(stdout, v)
	default:
		data, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, string(data))
	}
	return nil
}
