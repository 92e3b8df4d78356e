package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/cmp-injector/cmp-injector/hack/images/oci"
)

// imageSpec is one image: a product image, or a plugin image of the library
// (deploy/plugins/<plugin>/), which is the cmp-server image plus a tool.
type imageSpec struct {
	Name string // repository's last element
	Cmd  string // Go package of the main
	Bin  string // the binary's name in binDir, the entrypoint
	// User is the non-root UID:GID the image runs as: the cmp-server image is
	// also the copy init container and defaults to Argo CD's 999; the injector
	// runs as the distroless nonroot user.
	User string
	// Tool is a plugin image's tool, nil in a product image.
	Tool *toolSpec
}

// toolSpec is a tool built from the Go module proxy at the package and
// version hack/versions.sh pins, the same build hack/tools.sh puts in bin/.
type toolSpec struct {
	Name       string // the binary's name in binDir
	Plugin     string // the deploy/plugins/<plugin> whose catalog entry runs the image
	PkgVar     string // hack/versions.sh's variable holding the Go package
	VersionVar string // and the one holding the version
	License    string // SPDX expression of the tool's licence
}

var specs = []imageSpec{
	{Name: "cmp-injector", Cmd: "./cmd/cmp-injector", Bin: "cmp-injector", User: "65532:65532"},
	{Name: "cmp-server", Cmd: "./cmd/cmp-server", Bin: "cmp-server", User: "999:999"},
	{Name: "cmp-jsonnet", Cmd: "./cmd/cmp-server", Bin: "cmp-server", User: "999:999",
		Tool: &toolSpec{Name: "jsonnet", Plugin: "jsonnet", PkgVar: "JSONNET_PKG", VersionVar: "JSONNET_VERSION", License: "Apache-2.0"}},
	{Name: "cmp-sops", Cmd: "./cmd/cmp-server", Bin: "cmp-server", User: "999:999",
		Tool: &toolSpec{Name: "sops", Plugin: "sops", PkgVar: "SOPS_PKG", VersionVar: "SOPS_VERSION", License: "MPL-2.0"}},
}

// buildInfo is what every image of one build shares.
type buildInfo struct {
	Root     string    // repository root
	Registry string    // e.g. ghcr.io/cmp-injector
	Tag      string    // the chart's appVersion
	Version  string    // what the binaries report (git describe)
	Revision string    // git commit
	Epoch    time.Time // every timestamp in the image: the commit's time
	CAFile   string    // the build machine's CA bundle
	WorkDir  string    // where binaries are compiled
	// Pins are hack/versions.sh's NAME=value lines: the plugin tools'
	// packages and versions.
	Pins map[string]string
}

// platforms are the image index's platforms, in order.
var platforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}

// binDir is where images expect the product binaries; the catalog's copy
// container runs /usr/local/bin/cmp-server.
const binDir = "usr/local/bin"

// buildImage compiles spec's binary for p and assembles its image: an empty
// base, one layer with what a distroless static image has, one with the binary
// and, in a plugin image, one with the tool.
func buildImage(ctx context.Context, b buildInfo, spec imageSpec, p v1.Platform) (v1.Image, error) {
	bin := filepath.Join(b.WorkDir, p.Architecture, spec.Bin)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath",
		"-ldflags", "-s -w -X github.com/cmp-injector/cmp-injector/pkg/version.Version="+b.Version,
		"-o", bin, spec.Cmd)
	cmd.Dir = b.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture, "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build %s for %s/%s: %v\n%s", spec.Cmd, p.OS, p.Architecture, err, out)
	}
	base, err := baseLayer(b)
	if err != nil {
		return nil, err
	}
	app, err := fileLayer(bin, spec.Bin, b.Epoch)
	if err != nil {
		return nil, err
	}
	adds := []mutate.Addendum{
		{Layer: base, History: v1.History{Created: v1.Time{Time: b.Epoch}, CreatedBy: "cmp-injector hack/images: CA certificates, passwd, group, /tmp", Comment: "base"}},
		{Layer: app, History: v1.History{Created: v1.Time{Time: b.Epoch}, CreatedBy: "cmp-injector hack/images: " + spec.Cmd}},
	}
	if spec.Tool != nil {
		pkg, version, file, err := buildTool(ctx, b, *spec.Tool, p)
		if err != nil {
			return nil, err
		}
		layer, err := fileLayer(file, spec.Tool.Name, b.Epoch)
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.Addendum{Layer: layer, History: v1.History{Created: v1.Time{Time: b.Epoch},
			CreatedBy: "cmp-injector hack/images: go install " + pkg + "@" + version, Comment: spec.Tool.Name}})
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, adds...)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = p.OS, p.Architecture, p.Variant
	cfg.Created = v1.Time{Time: b.Epoch}
	cfg.Author = "cmp-injector"
	cfg.Config = v1.Config{
		User:       spec.User,
		Entrypoint: []string{"/" + binDir + "/" + spec.Bin},
		WorkingDir: "/",
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
		Labels:     b.labels(spec),
	}
	return mutate.ConfigFile(img, cfg)
}

// fileLayer is a layer holding the executable file as binDir/name.
func fileLayer(file, name string, epoch time.Time) (v1.Layer, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return oci.Layer([]oci.Entry{{Path: binDir + "/" + name, Mode: 0o755, Data: data}}, epoch)
}

// labels are the OCI annotations every registry and scanner reads; a plugin
// image names its tool, the tool's pin and licence too.
func (b buildInfo) labels(spec imageSpec) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.source":      "https://github.com/cmp-injector/cmp-injector",
		"org.opencontainers.image.title":       spec.Name,
		"org.opencontainers.image.version":     b.Version,
		"org.opencontainers.image.revision":    b.Revision,
		"org.opencontainers.image.created":     b.Epoch.UTC().Format(time.RFC3339),
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.description": "cmp-injector: Argo CD Config Management Plugins as injected sidecars",
	}
	if t := spec.Tool; t != nil {
		pkg, version := b.Pins[t.PkgVar], b.Pins[t.VersionVar]
		l["org.opencontainers.image.licenses"] = "Apache-2.0 AND " + t.License
		l["org.opencontainers.image.description"] = fmt.Sprintf("cmp-injector's %s plugin (deploy/plugins/%s): cmp-server and %s %s built from %s",
			t.Plugin, t.Plugin, t.Name, version, pkg)
		l[toolLabel] = pkg + "@" + version
	}
	return l
}

// toolLabel names the Go package and version of a plugin image's tool.
const toolLabel = "io.cmp-injector.tool"

// baseLayer is what a distroless static image holds: CA certificates (the
// build machine's Debian ca-certificates), passwd and group, a sticky /tmp and
// the non-root users' homes.
func baseLayer(b buildInfo) (v1.Layer, error) {
	ca, err := os.ReadFile(b.CAFile)
	if err != nil {
		return nil, fmt.Errorf("CA certificates (Debian's ca-certificates package): %w", err)
	}
	return oci.Layer(append(oci.Base(), oci.Entry{Path: "etc/ssl/certs/ca-certificates.crt", Mode: 0o644, Data: ca}), b.Epoch)
}
