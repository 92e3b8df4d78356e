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

// imageSpec is one product image.
type imageSpec struct {
	Name string // repository's last element and the binary's name
	Cmd  string // Go package of the main
	// User is the non-root UID:GID the image runs as: the cmp-server image is
	// also the copy init container and defaults to Argo CD's 999; the injector
	// runs as the distroless nonroot user.
	User string
}

var specs = []imageSpec{
	{Name: "cmp-injector", Cmd: "./cmd/cmp-injector", User: "65532:65532"},
	{Name: "cmp-server", Cmd: "./cmd/cmp-server", User: "999:999"},
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
}

// platforms are the image index's platforms, in order.
var platforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}

// binDir is where images expect the product binaries; the catalog's copy
// container runs /usr/local/bin/cmp-server.
const binDir = "usr/local/bin"

// buildImage compiles spec's binary for p and assembles its image: an empty
// base, one layer with what a distroless static image has, one with the binary.
func buildImage(ctx context.Context, b buildInfo, spec imageSpec, p v1.Platform) (v1.Image, error) {
	bin := filepath.Join(b.WorkDir, p.Architecture, spec.Name)
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
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	app, err := oci.Layer([]oci.Entry{{Path: binDir + "/" + spec.Name, Mode: 0o755, Data: data}}, b.Epoch)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: v1.Time{Time: b.Epoch}, CreatedBy: "cmp-injector hack/images: CA certificates, passwd, group, /tmp", Comment: "base"}},
		mutate.Addendum{Layer: app, History: v1.History{Created: v1.Time{Time: b.Epoch}, CreatedBy: "cmp-injector hack/images: " + spec.Cmd}})
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
		Entrypoint: []string{"/" + binDir + "/" + spec.Name},
		WorkingDir: "/",
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
		Labels:     b.labels(spec),
	}
	return mutate.ConfigFile(img, cfg)
}

// labels are the OCI annotations every registry and scanner reads.
func (b buildInfo) labels(spec imageSpec) map[string]string {
	return map[string]string{
		"org.opencontainers.image.source":      "https://github.com/cmp-injector/cmp-injector",
		"org.opencontainers.image.title":       spec.Name,
		"org.opencontainers.image.version":     b.Version,
		"org.opencontainers.image.revision":    b.Revision,
		"org.opencontainers.image.created":     b.Epoch.UTC().Format(time.RFC3339),
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.description": "cmp-injector: Argo CD Config Management Plugins as injected sidecars",
	}
}

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
