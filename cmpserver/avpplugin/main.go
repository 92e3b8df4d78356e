// Package avpplugin runs argocd-vault-plugin (AVP) on what an app renders to:
// `cmp-server avp generate` renders a Helm chart with the built-in helm plugin,
// a kustomization with the built-in kustomize plugin (helmCharts inflated), or
// takes a directory of plain manifests as it is, and has AVP replace its
// placeholders. One sidecar thus serves the three kinds of app AVP's own
// documentation gives three sidecars for, without a shell: each step is
// started with an argv and the render is piped into `argocd-vault-plugin
// generate -`.
package avpplugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cmp-injector/cmp-injector/cmpserver/kustomizeplugin"
	"github.com/cmp-injector/cmp-injector/cmpserver/toolrun"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// Command is `cmp-server avp`, added to cmp-server's commands by cmd/cmp-server.
var Command = serving.Command{
	Name:    "avp",
	Summary: "argocd-vault-plugin on a Helm chart, a kustomization or plain manifests: generate renders and replaces placeholders",
	Run:     runCommand,
}

const notes = `actions:
  generate     render the app in the working directory and replace its placeholders
               with argocd-vault-plugin: a Helm chart (Chart.yaml) with
               "cmp-server helm generate", a kustomization with "cmp-server
               kustomize generate --enable-helm", else the directory's YAML and
               JSON files as they are
  parameters   print the app's parameter announcement as a JSON array: a chart's
               values (as "cmp-server helm parameters"), nothing otherwise

The Application's parameters (ARGOCD_APP_PARAMETERS) go to the helm or kustomize
step; AVP reads its own settings (AVP_TYPE, VAULT_ADDR, AVP_K8S_ROLE, ...) from the
sidecar's env.`

// Binary is AVP's program name, looked up on the plugin env's PATH.
const Binary = "argocd-vault-plugin"

// Kind is what an app directory holds.
type Kind string

// The kinds of app, in the order they are recognised.
const (
	KindHelm      Kind = "helm"
	KindKustomize Kind = "kustomize"
	KindPlain     Kind = "plain"
)

// Detect says what dir holds, as Argo CD's own source detection orders it: a
// chart before a kustomization, anything else plain manifests.
func Detect(dir string) (Kind, error) {
	if ok, err := exists(filepath.Join(dir, "Chart.yaml")); ok || err != nil {
		return KindHelm, err
	}
	for _, name := range kustomizeplugin.KustomizationFiles {
		if ok, err := exists(filepath.Join(dir, name)); ok || err != nil {
			return KindKustomize, err
		}
	}
	return KindPlain, nil
}

func exists(p string) (bool, error) {
	_, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

func runCommand(ctx context.Context, args []string, stdio serving.IO) error {
	fs := serving.NewFlagSet("cmp-server avp", "generate|parameters")
	fs.Notes(notes)
	action, err := fs.ParseAction(args)
	if err != nil {
		return err
	}
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	kind, err := Detect(dir)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot find cmp-server itself: %w", err)
	}
	env := os.Environ()
	switch action {
	case "generate":
		return generate(ctx, self, kind, dir, env, stdio)
	case "parameters":
		if kind != KindHelm {
			_, err := io.WriteString(stdio.Stdout, "[]\n")
			return err
		}
		return runSelf(ctx, self, []string{"helm", "parameters"}, dir, env, stdio.Stdout, stdio.Stderr)
	case "":
		return fs.Errorf("an action is required: generate or parameters")
	default:
		return fs.Errorf("unknown action %q: want generate or parameters", action)
	}
}

// renderArgs are cmp-server's own arguments that render an app of kind.
func renderArgs(kind Kind) []string {
	switch kind {
	case KindHelm:
		return []string{"helm", "generate"}
	case KindKustomize:
		return []string{"kustomize", "generate", "--enable-helm"}
	}
	return nil
}

// generate renders the app and pipes it into AVP; a plain directory is read
// by AVP itself, as its documentation's plain sidecar does.
func generate(ctx context.Context, self string, kind Kind, dir string, env []string, stdio serving.IO) error {
	avp, err := toolrun.Find(Binary, env)
	if err != nil {
		return err
	}
	if kind == KindPlain {
		return pipeline(ctx, nil, exec.CommandContext(ctx, avp, "generate", "./"), dir, env, stdio)
	}
	render := exec.CommandContext(ctx, self, renderArgs(kind)...)
	return pipeline(ctx, render, exec.CommandContext(ctx, avp, "generate", "-"), dir, env, stdio)
}

// pipeline runs render (if any) with its stdout into avp's stdin, both in dir
// with env, avp's stdout to ours. Each one's stderr is passed on; the first
// step that fails is the error, with its own message.
func pipeline(ctx context.Context, render, avp *exec.Cmd, dir string, env []string, stdio serving.IO) error {
	var avpErr bytes.Buffer
	avp.Dir, avp.Env, avp.Stdout = dir, env, stdio.Stdout
	avp.Stderr = io.MultiWriter(&avpErr, stdio.Stderr)
	avp.WaitDelay = 5 * time.Second
	var renderErr bytes.Buffer
	if render != nil {
		render.Dir, render.Env = dir, env
		render.Stderr = io.MultiWriter(&renderErr, stdio.Stderr)
		render.WaitDelay = 5 * time.Second
		pipe, err := avp.StdinPipe()
		if err != nil {
			return err
		}
		render.Stdout = pipe
		if err := render.Start(); err != nil {
			return fmt.Errorf("starting the %s step: %w", render.Args[1], err)
		}
		if err := avp.Start(); err != nil {
			_ = render.Process.Kill()
			_ = render.Wait()
			return fmt.Errorf("starting %s: %w", Binary, err)
		}
		rerr := render.Wait()
		pipe.Close() // AVP reads to the end of the render
		aerr := avp.Wait()
		if rerr != nil && (aerr == nil || !killedBySignal(rerr)) {
			// The render's own words (helm's or kustomize's), not AVP's
			// complaint about a short input. A render killed by a signal
			// while AVP failed is SIGPIPE: AVP stopped reading, and its
			// error is the cause.
			return stepError(render.Args[1], rerr, renderErr.String())
		}
		return stepError(Binary, aerr, avpErr.String())
	}
	return stepError(Binary, avp.Run(), avpErr.String())
}

// stepError is a failed step's error: its stderr's last line (AVP prints
// "Error: ..." last), with its exit code.
func stepError(step string, err error, stderr string) error {
	if err == nil {
		return nil
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return fmt.Errorf("%s: %w", step, err)
	}
	msg := lastLine(stderr)
	if msg == "" {
		msg = err.Error()
	}
	code := exit.ExitCode()
	if code <= 0 {
		code = 1
	}
	return &serving.ExitError{Code: code, Err: fmt.Errorf("%s: %s", step, msg)}
}

func killedBySignal(err error) bool {
	var exit *exec.ExitError
	return errors.As(err, &exit) && exit.ExitCode() == -1
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// runSelf runs cmp-server with args, its output passed on.
func runSelf(ctx context.Context, self string, args []string, dir string, env []string, stdout, stderr io.Writer) error {
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, stdout, stderr
	cmd.WaitDelay = 5 * time.Second
	var exit *exec.ExitError
	if err := cmd.Run(); errors.As(err, &exit) {
		return &serving.ExitError{Code: exit.ExitCode(), Err: fmt.Errorf("cmp-server %s failed", strings.Join(args, " "))}
	} else if err != nil {
		return err
	}
	return nil
}
