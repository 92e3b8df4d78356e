// Command images builds the OCI images of cmp-injector and cmp-server, and the
// plugin library's images (cmp-server plus one pinned tool, e.g. cmp-jsonnet),
// with no container engine and no base image download (`make images`): each is
// static binaries on an empty image plus what a distroless static image holds,
// for linux/amd64 and linux/arm64, written under bin/images as
//
//	<name>.oci.tar              an OCI image layout of the multi-platform index
//	                            (ctr images import, kind load image-archive,
//	                            k3d image import, docker load on Docker 25+)
//	<name>-linux-<arch>.tar     one platform as `docker save` writes it (docker load)
//
// Every timestamp is the commit's, so two builds of one commit give the same
// digests. The tag is the chart's appVersion.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	out := flag.String("out", "bin/images", "output directory")
	registry := flag.String("registry", "ghcr.io/cmp-injector", "registry and namespace of the image names")
	version := flag.String("version", "", "version the binaries report (default: git describe --tags --always --dirty)")
	platform := flag.String("platform", "", "build only this platform (e.g. linux/amd64; default: every platform of the index)")
	rootfs := flag.String("rootfs", "", "write only this plugin runtime's tree (e.g. cdk8s, for bin/) into --out, for this machine's architecture")
	flag.Parse()
	if *rootfs != "" {
		if err := runRootfs(*rootfs, *out); err != nil {
			fmt.Fprintln(os.Stderr, "images:", err)
			os.Exit(1)
		}
		return
	}
	if *platform != "" {
		if err := onlyPlatform(*platform); err != nil {
			fmt.Fprintln(os.Stderr, "images:", err)
			os.Exit(2)
		}
	}
	if err := run(*out, *registry, *version); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(out, registry, version string) error {
	ctx := context.Background()
	b, err := newBuildInfo(registry, version)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "cmpimages")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	b.WorkDir = work
	results, err := buildAll(ctx, b, out)
	if err != nil {
		return err
	}
	for _, r := range results {
		fmt.Println(r)
	}
	return nil
}

// newBuildInfo reads the tag from the chart and the version, revision and
// time from git (SOURCE_DATE_EPOCH, when set, wins for the time).
func newBuildInfo(registry, version string) (buildInfo, error) {
	root, err := gitOut("", "rev-parse", "--show-toplevel")
	if err != nil {
		return buildInfo{}, err
	}
	b := buildInfo{Root: root, Registry: registry, Version: version, CAFile: "/etc/ssl/certs/ca-certificates.crt"}
	chart, err := os.ReadFile(filepath.Join(root, "charts", "cmp-injector", "Chart.yaml"))
	if err != nil {
		return b, err
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(chart, &c); err != nil || c.AppVersion == "" {
		return b, fmt.Errorf("charts/cmp-injector/Chart.yaml has no appVersion (%w)", err)
	}
	b.Tag = c.AppVersion
	if b.Pins, err = readPins(root); err != nil {
		return b, err
	}
	b.RootfsPins, b.RootfsLicenses = map[string]map[string]string{}, map[string][]string{}
	for _, s := range specs {
		if r := s.Rootfs; r != nil {
			if b.RootfsPins[r.Name], b.RootfsLicenses[r.Name], err = readRootfsPins(root, *r); err != nil {
				return b, err
			}
		}
	}
	if b.Version == "" {
		if b.Version, err = gitOut(root, "describe", "--tags", "--always", "--dirty"); err != nil {
			return b, err
		}
	}
	if b.Revision, err = gitOut(root, "rev-parse", "HEAD"); err != nil {
		return b, err
	}
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		if epoch, err = gitOut(root, "log", "-1", "--format=%ct"); err != nil {
			return b, err
		}
	}
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return b, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", epoch, err)
	}
	b.Epoch = time.Unix(sec, 0).UTC()
	return b, nil
}

// onlyPlatform narrows platforms to p: the end-to-end suite's node imports one
// platform's archive and need not cross-compile the others.
func onlyPlatform(p string) error {
	for _, q := range platforms {
		if q.OS+"/"+q.Architecture == p {
			platforms = []v1.Platform{q}
			return nil
		}
	}
	return fmt.Errorf("--platform %q: want one of linux/amd64, linux/arm64", p)
}

func gitOut(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// runRootfs writes the named runtime's tree for this machine into out: the
// same entries as the image's layers, so bin/'s tool is the image's.
func runRootfs(name, out string) error {
	var spec *rootfsSpec
	for _, s := range specs {
		if s.Rootfs != nil && s.Rootfs.Name == name {
			spec = s.Rootfs
		}
	}
	if spec == nil {
		return fmt.Errorf("--rootfs %q: no image has that runtime", name)
	}
	root, err := gitOut("", "rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "cmprootfs")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	debs, npm, _, err := rootfsLayers(context.Background(), buildInfo{Root: root, WorkDir: work}, *spec, runtime.GOARCH)
	if err != nil {
		return err
	}
	return writeRootfs(out, append(debs, npm...))
}
