// Package engine runs one plugin (its init, generate, discovery and
// parameters commands) against a received repository: the app dir and env a
// request's commands get (Workspace), and what their output means.
package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/cmp-injector/cmp-injector/cmpserver/command"
	"github.com/cmp-injector/cmp-injector/cmpserver/manifests"
	"github.com/cmp-injector/cmp-injector/cmpserver/unpack"
	"github.com/cmp-injector/cmp-injector/pkg/params"
	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
)

// Engine runs one plugin against unpacked repositories. The gRPC service and the
// local runner both go through it, so a plugin behaves the same on a laptop and in
// a sidecar.
type Engine struct {
	plugin  *pluginconfig.Plugin
	limits  unpack.Limits
	workDir string
	runner  *command.Runner
	// env is what every command starts from: the server's env (Options.Env)
	// and the log settings (see logEnv).
	env []string
	log *zap.Logger
	// serial holds one token when allowConcurrency is false.
	serial chan struct{}
}

// New runs p's commands with exec's bounds under workDir (request dirs are
// <workDir>/<uuid>), each starting from env; obs is told how each ended.
func New(p *pluginconfig.Plugin, limits unpack.Limits, workDir string, exec command.Options, env []string, log *zap.Logger, obs command.Observer) *Engine {
	e := &Engine{plugin: p, limits: limits, workDir: workDir, runner: command.NewRunner(exec, log, obs), env: env, log: log}
	if !p.Concurrent() {
		e.serial = make(chan struct{}, 1)
	}
	return e
}

// Workspace is one request's unpacked repository and command environment.
type Workspace struct {
	dir    string // request dir, removed by cleanup
	root   string // repository root: the request dir itself, as in Argo CD
	appDir string
	env    []string
}

// place is where the workspace's commands run.
func (ws *Workspace) place() command.Place {
	return command.Place{App: ws.appDir, Env: ws.env, Spool: ws.dir}
}

// NewRequestDir creates the directory of one request: <work dir>/<random UUID>,
// mode 0755 (the work dir itself is 0700), which is where argocd-cmp-server
// unpacks a request. Plugins see it as (the parent of) their working directory,
// so the shape is kept.
func (e *Engine) NewRequestDir() (string, error) {
	for range 3 {
		dir := filepath.Join(e.workDir, newUUID())
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("error creating request dir: %w", err)
		}
	}
	return "", errors.New("error creating request dir: random names keep colliding")
}

// newUUID returns a random (version 4) UUID in its usual text form.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail on Linux
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Cleanup removes the request dir dir.
func (e *Engine) Cleanup(dir string) {
	if err := os.RemoveAll(dir); err != nil {
		e.log.Warn("error removing request dir", zap.String("dir", dir), zap.Error(err))
	}
}

// UnpackTo is where a request's tarball goes: into the request dir itself, as
// Argo CD does, spooled beside it in the work dir.
func (e *Engine) UnpackTo(dir string) *unpack.Target {
	return &unpack.Target{Dir: dir, SpoolDir: e.workDir, Limits: e.limits, PreserveMode: e.plugin.Spec.PreserveFileMode}
}

// Workspace resolves the app dir and command env of a received repository
// whose request dir is dir and whose tree is root (unpacked when unpacked is
// set): dir itself, or a tree shared between requests (trees.go).
func (e *Engine) Workspace(dir, root string, repo *unpack.Repo, unpacked bool) (*Workspace, error) {
	ws := &Workspace{dir: dir, root: root}
	env, err := command.Env(e.env, repo.Meta.GetEnv())
	if err != nil {
		return nil, err
	}
	ws.env = env
	var ok bool
	if ws.appDir, ok = appDir(ws.root, repo.Meta.GetAppRelPath()); !ok {
		return nil, fmt.Errorf("illegal appPath: out of workDir bound")
	}
	if !unpacked {
		return ws, nil
	}
	fi, err := os.Stat(ws.appDir)
	if err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("app path %q is not a directory in the repository", repo.Meta.GetAppRelPath())
	}
	return ws, nil
}

// Generate runs init then generate in the app dir and hands sink each object
// of the output, as JSON.
func (e *Engine) Generate(ctx context.Context, ws *Workspace, sink manifests.Sink) error {
	if e.serial != nil {
		select {
		case e.serial <- struct{}{}:
			defer func() { <-e.serial }()
		case <-ctx.Done():
			return fmt.Errorf("waiting for the previous generation (allowConcurrency: false): %w", ctx.Err())
		}
	}
	if init := e.plugin.Spec.Init; init != nil && len(init.Command) > 0 {
		out, err := e.runner.Run(ctx, "init", *init, ws.place())
		if err != nil {
			return err
		}
		out.Close()
	}
	out, err := e.runner.Run(ctx, "generate", e.plugin.Spec.Generate, ws.place())
	if err != nil {
		return err
	}
	defer out.Close()
	if empty, _ := out.Empty(); empty {
		e.log.Warn("generate printed nothing: zero manifests")
	}
	return manifests.Split(out.Reader(), sink)
}

// appDir is the app's dir in the tree at root, false if it leaves root.
func appDir(root, appRelPath string) (string, bool) {
	dir := filepath.Clean(filepath.Join(root, appRelPath))
	return dir, unpack.Inside(root, dir)
}

// nameRule is a discovery rule that reads names only: fileName
// (filepath.Glob) or find.glob (zglob), evaluated by match.
type nameRule struct {
	pattern string
	glob    bool // find.glob
}

func (r nameRule) match(root, appDir string) (bool, error) {
	if r.glob {
		return globAny(root, appDir, r.pattern)
	}
	return fileNameMatches(root, appDir, r.pattern)
}

// nameRule is the first configured discovery rule, as Argo CD picks it,
// when it reads names only (pluginconfig's DiscoveryReadsNamesOnly).
func (e *Engine) nameRule() (nameRule, bool) {
	d := e.plugin.Spec.Discover
	switch {
	case d == nil:
		return nameRule{}, false
	case d.FileName != "":
		return nameRule{pattern: d.FileName}, true
	case d.Find != nil && d.Find.Glob != "":
		return nameRule{pattern: d.Find.Glob, glob: true}, true
	}
	return nameRule{}, false
}

// Match evaluates the first configured discovery rule only, as Argo CD does.
func (e *Engine) Match(ctx context.Context, ws *Workspace) (bool, error) {
	if r, ok := e.nameRule(); ok {
		return r.match(ws.root, ws.appDir)
	}
	d := e.plugin.Spec.Discover
	switch {
	case d == nil:
		return false, nil
	case d.Find != nil && len(d.Find.Command.Command) > 0:
		out, err := e.runner.Run(ctx, "discover", d.Find.Command, ws.place())
		if err != nil {
			// Argo CD's wording, kept so the message can be searched for.
			return false, fmt.Errorf("error running find command: %w", err)
		}
		defer out.Close()
		empty, err := out.Empty()
		return !empty, err
	}
	return false, nil
}

// Parameters is the dynamic announcement (if configured) followed by the static one.
func (e *Engine) Parameters(ctx context.Context, ws *Workspace) ([]params.Announcement, error) {
	ps := e.plugin.Spec.Parameters
	if ps == nil {
		return nil, nil
	}
	var dynamic []params.Announcement
	if ps.Dynamic != nil && len(ps.Dynamic.Command) > 0 {
		spooled, err := e.runner.Run(ctx, "parameters", *ps.Dynamic, ws.place())
		if err != nil {
			// Argo CD's wording, kept so the message can be searched for.
			return nil, fmt.Errorf("error executing dynamic parameter output command: %w", err)
		}
		out, err := spooled.Bytes()
		spooled.Close()
		if err != nil {
			return nil, err
		}
		if dynamic, err = parseDynamic(out); err != nil {
			return nil, err
		}
	}
	return params.Merge(dynamic, ps.Static), nil
}

// PreserveMode is the plugin's preserveFileMode: a shared tree is unpacked
// once per mode.
func (e *Engine) PreserveMode() bool { return e.plugin.Spec.PreserveFileMode }

// KeepSerial makes e, a reload of old, wait for old's generations too, so
// that allowConcurrency: false holds across the switch.
func (e *Engine) KeepSerial(old *Engine) {
	if old != nil && old.serial != nil && e.serial != nil {
		e.serial = old.serial
	}
}
