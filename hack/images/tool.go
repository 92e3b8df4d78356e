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

// buildTool builds a plugin image's tool for p from the Go module proxy, as
// hack/tools.sh does for bin/ (go install PKG@VERSION, -trimpath, stripped),
// and returns the package, version and binary. go install cross-compiles only
// into a GOPATH (not GOBIN), so the GOPATH is a private one under WorkDir,
// sharing this machine's module and build caches.
func buildTool(ctx context.Context, b buildInfo, t toolSpec, p v1.Platform) (pkg, version, file string, err error) {
	pkg, version = b.Pins[t.PkgVar], b.Pins[t.VersionVar]
	if pkg == "" || version == "" {
		return "", "", "", fmt.Errorf("hack/versions.sh has no %s and %s for the %s image", t.PkgVar, t.VersionVar, t.Name)
	}
	modcache, err := goEnv(ctx, "GOMODCACHE")
	if err != nil {
		return "", "", "", err
	}
	gopath := filepath.Join(b.WorkDir, "gopath-"+p.Architecture)
	cmd := exec.CommandContext(ctx, "go", "install", "-trimpath", "-ldflags", "-s -w", pkg+"@"+version)
	cmd.Dir = b.WorkDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture,
		"GOPATH="+gopath, "GOMODCACHE="+modcache, "GOBIN=", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", "", fmt.Errorf("go install %s@%s for %s/%s: %v\n%s", pkg, version, p.OS, p.Architecture, err, out)
	}
	// A cross-compiled binary lands in bin/GOOS_GOARCH, a native one in bin.
	for _, f := range []string{filepath.Join(gopath, "bin", p.OS+"_"+p.Architecture, t.Name), filepath.Join(gopath, "bin", t.Name)} {
		if _, err := os.Stat(f); err == nil {
			return pkg, version, f, nil
		}
	}
	return "", "", "", fmt.Errorf("go install %s@%s for %s/%s wrote no %s under %s", pkg, version, p.OS, p.Architecture, t.Name, gopath)
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
