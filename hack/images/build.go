package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
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
	app, err := layer([]entry{{path: binDir + "/" + spec.Name, mode: 0o755, data: data}}, b.Epoch)
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

// Users of the base layer, as distroless static has them plus Argo CD's.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n" +
		"argocd:x:999:999:argocd:/home/argocd:/sbin/nologin\n"
	group = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\nargocd:x:999:\n"
)

// baseLayer is what a distroless static image holds: CA certificates (the
// build machine's Debian ca-certificates), passwd and group, a sticky /tmp and
// the non-root users' homes.
func baseLayer(b buildInfo) (v1.Layer, error) {
	ca, err := os.ReadFile(b.CAFile)
	if err != nil {
		return nil, fmt.Errorf("CA certificates (Debian's ca-certificates package): %w", err)
	}
	return layer([]entry{
		{path: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: ca},
		{path: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{path: "etc/group", mode: 0o644, data: []byte(group)},
		{path: "tmp", mode: 0o1777 | int64(os.ModeDir)},
		{path: "home/nonroot", mode: 0o700 | int64(os.ModeDir), uid: 65532},
		{path: "home/argocd", mode: 0o700 | int64(os.ModeDir), uid: 999},
	}, b.Epoch)
}

// entry is one file or directory of a layer.
type entry struct {
	path string
	mode int64 // permission bits, plus os.ModeDir for a directory
	uid  int
	data []byte
}

// layer writes entries (and their parent directories) into a tar with one
// timestamp and sorted names, so the same input always gives the same digest.
func layer(entries []entry, epoch time.Time) (v1.Layer, error) {
	all := map[string]entry{}
	for _, e := range entries {
		all[e.path] = e
		for d := filepath.Dir(e.path); d != "."; d = filepath.Dir(d) {
			if _, ok := all[d]; !ok {
				all[d] = entry{path: d, mode: 0o755 | int64(os.ModeDir)}
			}
		}
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		e := all[n]
		h := &tar.Header{Name: n, Mode: e.mode &^ int64(os.ModeDir), ModTime: epoch, Uid: e.uid, Gid: e.uid,
			Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(e.data))}
		if e.mode&int64(os.ModeDir) != 0 {
			h.Typeflag, h.Name, h.Size = tar.TypeDir, n+"/", 0
		}
		if strings.Contains(n, "..") {
			return nil, fmt.Errorf("bad layer path %q", n)
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
