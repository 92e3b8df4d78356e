package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// builtTool is one platform's build of a tool: the binary and how it was
// built, for the layer's history.
type builtTool struct {
	File, How string
}

// pin is the Go package and version a tool is built from.
func (b buildInfo) pin(t toolSpec) (pkg, version string) {
	pkg = t.Pkg
	if t.PkgVar != "" {
		pkg = b.Pins[t.PkgVar]
	}
	return pkg, b.Pins[t.VersionVar]
}

// ldflags are the linker flags hack/tools.sh gives the tool; pin gives
// each PinSymbols variable's value (hack/tools.sh's is "$NAME").
func (t toolSpec) ldflags(version string, pin func(name string) string) string {
	var f []string
	if t.Strip {
		f = append(f, "-s", "-w")
	}
	if t.VersionSymbol != "" {
		f = append(f, "-X", t.VersionSymbol+"="+version)
	}
	for _, s := range t.PinSymbols {
		f = append(f, "-X", s.Symbol+"="+pin(s.Var))
	}
	return strings.Join(f, " ")
}

// pinOf reads hack/versions.sh's variables for ldflags.
func (b buildInfo) pinOf(name string) string { return b.Pins[name] }

// buildTool builds a plugin image's tool for p from the Go module proxy, as
// hack/tools.sh does for bin/ (-trimpath and the same ldflags): go install
// PKG@VERSION, or go build in the tool's tools module. go install
// cross-compiles only into a GOPATH (not GOBIN), so the GOPATH is a private
// one under WorkDir, sharing this machine's module and build caches.
func buildTool(ctx context.Context, b buildInfo, t toolSpec, p v1.Platform) (builtTool, error) {
	pkg, version := b.pin(t)
	if pkg == "" || version == "" {
		return builtTool{}, fmt.Errorf("the %s tool has no package or version: hack/versions.sh lacks %s%s or %s", t.Name, t.PkgVar, t.Pkg, t.VersionVar)
	}
	modcache, err := goEnv(ctx, "GOMODCACHE")
	if err != nil {
		return builtTool{}, err
	}
	gopath := filepath.Join(b.WorkDir, "gopath-"+p.Architecture)
	env := append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture,
		"GOPATH="+gopath, "GOMODCACHE="+modcache, "GOBIN=", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	if t.Module != "" {
		return buildInModule(ctx, b, t, p, pkg, version, env)
	}
	how := "go install " + pkg + "@" + version
	cmd := exec.CommandContext(ctx, "go", "install", "-trimpath", "-ldflags", t.ldflags(version, b.pinOf), pkg+"@"+version)
	cmd.Dir, cmd.Env = b.WorkDir, env
	if out, err := cmd.CombinedOutput(); err != nil {
		return builtTool{}, fmt.Errorf("%s for %s/%s: %w\n%s", how, p.OS, p.Architecture, err, out)
	}
	// A cross-compiled binary lands in bin/GOOS_GOARCH, a native one in bin.
	for _, f := range []string{filepath.Join(gopath, "bin", p.OS+"_"+p.Architecture, t.Name), filepath.Join(gopath, "bin", t.Name)} {
		if _, err := os.Stat(f); err == nil {
			return builtTool{File: f, How: how}, nil
		}
	}
	return builtTool{}, fmt.Errorf("%s for %s/%s wrote no %s under %s", how, p.OS, p.Architecture, t.Name, gopath)
}

// buildInModule builds a tool in its tools module, whose go.mod must require
// the pinned version: its build would otherwise silently be another one.
func buildInModule(ctx context.Context, b buildInfo, t toolSpec, p v1.Platform, pkg, version string, env []string) (builtTool, error) {
	dir := filepath.Join(b.Root, filepath.FromSlash(t.Module))
	mod := exec.CommandContext(ctx, "go", "list", "-f", "{{.Module.Version}}", pkg)
	mod.Dir, mod.Env = dir, env
	out, err := mod.CombinedOutput()
	if err != nil {
		return builtTool{}, fmt.Errorf("the %s tools module (%s): go list %s: %w\n%s", t.Name, t.Module, pkg, err, out)
	}
	if got := strings.TrimSpace(string(out)); got != version {
		return builtTool{}, fmt.Errorf("the %s tools module (%s) requires %s, hack/versions.sh pins %s %s", t.Name, t.Module, got, t.VersionVar, version)
	}
	file := filepath.Join(b.WorkDir, "tools-"+p.Architecture, t.Name)
	how := "go build " + pkg + " in " + t.Module + " (" + version + ")"
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", t.ldflags(version, b.pinOf), "-o", file, pkg)
	cmd.Dir, cmd.Env = dir, env
	if out, err := cmd.CombinedOutput(); err != nil {
		return builtTool{}, fmt.Errorf("%s for %s/%s: %w\n%s", how, p.OS, p.Architecture, err, out)
	}
	return builtTool{File: file, How: how}, nil
}

func goEnv(ctx context.Context, name string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", name).Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// pinLine is a plain NAME=value assignment of hack/versions.sh (no
// expansion, optional double quotes).
var pinLine = regexp.MustCompile(`^([A-Z][A-Z0-9_]*)="?([^"$` + "`" + `]*)"?$`)

// readPins reads hack/versions.sh's assignments: the file is shell, sourced by
// hack/tools.sh, so both read the same pins.
func readPins(root string) (map[string]string, error) {
	f, err := os.Open(filepath.Join(root, "hack", "versions.sh"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pins := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := pinLine.FindStringSubmatch(strings.TrimSpace(sc.Text())); m != nil {
			pins[m[1]] = m[2]
		}
	}
	return pins, sc.Err()
}
