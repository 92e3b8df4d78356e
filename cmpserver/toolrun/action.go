package toolrun

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/params"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// GenerateAction parses the arguments of a built-in plugin whose one action
// is generate, and returns the Application's parameters
// (ARGOCD_APP_PARAMETERS) and the app directory (the working directory).
func GenerateAction(fs *serving.FlagSet, args []string) ([]params.AppParameter, string, error) {
	action, err := fs.ParseAction(args)
	if err != nil {
		return nil, "", err
	}
	switch action {
	case "generate":
	case "":
		return nil, "", fs.Errorf("an action is required: generate")
	default:
		return nil, "", fs.Errorf("unknown action %q: want generate", action)
	}
	return AppRequest()
}

// AppRequest is what a plugin command reads of its request: the Application's
// parameters (ARGOCD_APP_PARAMETERS) and the app directory (the working
// directory).
func AppRequest() ([]params.AppParameter, string, error) {
	ps, err := params.Decode([]byte(os.Getenv(keys.EnvAppParameters)))
	if err != nil {
		return nil, "", err
	}
	dir, err := os.Getwd()
	return ps, dir, err
}

// Warn prints a built-in plugin's warnings on w, one "warning: " line each:
// the repo-server logs a command's stderr, the Application never shows it.
func Warn(w io.Writer, warnings []string) error {
	for _, m := range warnings {
		if _, err := fmt.Fprintf(w, "warning: %s\n", m); err != nil {
			return err
		}
	}
	return nil
}

// CheckRelative refuses an empty or absolute path: the paths a parameter
// names are the repository's, relative to the app directory ("../lib" for a
// directory beside it is fine). This is no sandbox: a tool may read any file
// the sidecar can read, so the sidecar, which holds only the repository's
// copy, its image and its own mounts, is the boundary.
func CheckRelative(param, p string) error {
	if p == "" || path.IsAbs(p) {
		return fmt.Errorf("parameter %s: %q must be a path relative to the app directory", param, p)
	}
	return nil
}

// StreamGenerate is the generate action of a built-in plugin whose tool
// prints the manifests itself (YAML documents the plugin server splits):
// the Application's parameters turned into tool's argv by args, its warnings
// on stderr, the tool run in the app directory with the plugin env, its
// stdout passed on and its stderr after it.
func StreamGenerate(ctx context.Context, fs *serving.FlagSet, cmdArgs []string, stdio serving.IO, tool string,
	args func([]params.AppParameter) (argv, warnings []string, err error)) error {
	ps, dir, err := GenerateAction(fs, cmdArgs)
	if err != nil {
		return err
	}
	argv, warnings, err := args(ps)
	if werr := Warn(stdio.Stderr, warnings); werr != nil {
		return werr
	}
	if err != nil {
		return err
	}
	return StreamTo(ctx, stdio, tool, argv, dir, os.Environ(), func(msg string) string { return msg })
}

// StreamTo is Stream for a plugin command: the tool's stdout is the
// command's, and its stderr follows on the command's stderr when it
// succeeds (on a failure it is the error's text, worded by describe).
func StreamTo(ctx context.Context, stdio serving.IO, tool string, argv []string, dir string, env []string, describe func(msg string) string) error {
	stderr, err := Stream(ctx, tool, argv, dir, env, stdio.Stdout, describe)
	if len(stderr) > 0 {
		_, _ = stdio.Stderr.Write(stderr)
	}
	return err
}
