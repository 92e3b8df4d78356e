package kustomizeplugin

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/cmp-injector/cmp-injector/cmpserver/toolrun"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// generate runs p's edits and build in dir (the request's private copy of the
// repository, so the edits never reach the repository) and prints the build's
// manifests. kustomize's stderr on success (its warnings) is passed on; when
// it fails, its message is the error text the user reads and its exit code
// is ours.
func generate(ctx context.Context, p plan, dir string, env []string, stdio serving.IO) error {
	bin, err := kustomizeFor(ctx, p.version, dir, env)
	if err != nil {
		return err
	}
	for _, e := range p.edits {
		param := e.param
		if _, _, err := toolrun.Run(ctx, bin, e.args, dir, env, func(msg string) string {
			return "parameter " + param + ": " + msg
		}); err != nil {
			return err
		}
	}
	out, stderr, err := toolrun.Run(ctx, bin, p.build, dir, env, func(msg string) string { return msg })
	if err != nil {
		return err
	}
	if msg := bytes.TrimSpace(stderr); len(msg) > 0 {
		fmt.Fprintf(stdio.Stderr, "%s\n", msg)
	}
	_, err = stdio.Stdout.Write(out)
	return err
}

// kustomizeFor is the kustomize command for the version an Application asks
// for: kustomize-<version> when PATH has it, else kustomize when that is the
// version (what `kustomize version` prints, e.g. v5.8.2), else an error
// naming both. No version is the kustomize on PATH.
func kustomizeFor(ctx context.Context, version, dir string, env []string) (string, error) {
	if version == "" {
		return "kustomize", nil
	}
	versioned := "kustomize-" + version
	if _, err := toolrun.Find(versioned, env); err == nil {
		return versioned, nil
	}
	out, _, err := toolrun.Run(ctx, "kustomize", []string{"version"}, dir, env, func(msg string) string {
		return "kustomize version: " + msg
	})
	if err != nil {
		return "", err
	}
	if have := strings.TrimSpace(string(out)); have != version {
		return "", fmt.Errorf("kustomize %s is not installed in this sidecar (kustomize is %s, and there is no %s on PATH)", version, have, versioned)
	}
	return "kustomize", nil
}
