package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/cmp-injector/cmp-injector/hack/images/oci"
)

// imageSpec is one image: a product image, or a plugin image of the library
// (deploy/plugins/<plugin>/), which is the cmp-server image plus its tools.
type imageSpec struct {
	Name string // repository's last element
	Cmd  string // Go package of the main
	Bin  string // the binary's name in binDir, the entrypoint
	// User is the non-root UID:GID the image runs as: the cmp-server image is
	// also the copy init container and defaults to Argo CD's 999; the injector
	// runs as the distroless nonroot user.
	User string
	// Plugins are the deploy/plugins/<plugin> whose catalog entries run a
	// plugin image (one image may serve several, e.g. kustomize and
	// kustomize-helm); none in a product image.
	Plugins []string
	// Tools are a plugin image's tools, one layer each, in this order.
	Tools []toolSpec
	// Rootfs is a runtime Go cannot build (Debian and npm packages), two
	// layers after the tools.
	Rootfs *rootfsSpec
}

// toolSpec is a tool built from the Go module proxy at the version
// hack/versions.sh pins, the same build hack/tools.sh puts in bin/ (same
// flags, so the two are byte for byte the same): `go install PKG@VERSION`
// of the package PkgVar names, or, for a tool whose go.mod has a replace
// block that go install refuses, `go build` of Pkg inside the tools module
// Module, whose go.mod requires the pinned version and repeats the replaces.
type toolSpec struct {
	Name       string // the binary's name in binDir and in bin/
	PkgVar     string // hack/versions.sh's variable holding the Go package (go install)
	Module     string // or: the tools module's directory, relative to the repository root (go build)
	Pkg        string // and the main package built there
	VersionVar string // hack/versions.sh's variable holding the version
	// Strip is -s -w, VersionSymbol the -X symbol set to the version: the
	// ldflags hack/tools.sh builds the tool with.
	Strip         bool
	VersionSymbol string
	// PinSymbols are more -X flags, each set to a hack/versions.sh variable.
	PinSymbols []pinSymbol
	License    string // SPDX expression of the tool's licence
}

// pinSymbol is one -X flag whose value hack/versions.sh pins.
type pinSymbol struct{ Symbol, Var string }

// helm is in two images (cmp-helm, cmp-kustomize for kustomize's helmCharts),
// built with its release build's Kubernetes version (hack/versions.sh).
var helmTool = toolSpec{Name: "helm", PkgVar: "HELM_PKG", VersionVar: "HELM_VERSION", Strip: true,
	VersionSymbol: "helm.sh/helm/v3/internal/version.version", License: "Apache-2.0",
	PinSymbols: []pinSymbol{
		{"helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor", "HELM_KUBE_MAJOR"},
		{"helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor", "HELM_KUBE_MINOR"},
		{"helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor", "HELM_KUBE_MAJOR"},
		{"helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor", "HELM_KUBE_MINOR"},
	}}

var specs = []imageSpec{
	{Name: "cmp-injector", Cmd: "./cmd/cmp-injector", Bin: "cmp-injector", User: "65532:65532"},
	{Name: "cmp-server", Cmd: "./cmd/cmp-server", Bin: "cmp-server", User: "999:999"},
	{Name: "cmp-jsonnet", Cmd: "./cmd/cmp-server", Bin: "cmp-server", User: "999:999", Plugins: []string{"jsonnet"},
		Tools: []toolSpec{{Name: "jsonnet", PkgVar: "JSONNET_PKG", VersionVar: "JSONNET_VERSION", Strip: true, License: "Apache-2.0"}}},
	{Name: "cmp-sops", Cmd: "./cmd/cmp-server", Bin: "cmp-server", User: "999:999", Plugins: []string{"sops"},
		Tools: []toolSpec{{Name: "sops", PkgVar: "SOPS_PKG", VersionVar: "SOPS_VERSION", Strip: true, License: "MPL-2.0"}}},
	{Name: "cmp-helm", Cmd: "./cmd/cmp-server", Bin: "cmp-server", User: "999:999", Plugins: []string{"helm"},
		Tools: []toolSpec{helmTool}},
	// kustomize is built as hack/tools.sh builds it: not stripped.
	{Name: "cmp-kustomize", Cmd: "./cmd/cmp-server", Bin: "cmp-server", User: "999:999", Plugins: []string{"kustomize", "kustomize-helm"},
		Tools: []toolSpec{{Name: "kustomize", PkgVar: "KUSTOMIZE_PKG", VersionVar: "KUSTOMIZE_VERSION", License: "Apache-2.0"}, helmTool}},
	// helmfile's go.mod has a replace block: built in its tools module, as
	// hack/tools.sh's build_helmfile does; vals is a library inside it.
	{Name: "cmp-helmfile", Cmd: "./cmd/cmp-server", Bin: "cmp-server", User: "999:999", Plugins: []string{"helmfile"},
		Tools: []toolSpec{{Name: "helmfile", Module: "test/e2e/tools/helmfile", Pkg: "github.com/helmfile/helmfile", VersionVar: "HELMFILE_VERSION",
			Strip: true, VersionSymbol: "go.szostok.io/version.version", License: "MIT"}, helmTool}},
	// Tanka's tk in its tools module (go install cannot read its version list),
	// with its Makefile's release flags.
	{Name: "cmp-tanka", Cmd: "./cmd/cmp-server", Bin: "cmp-server", User: "999:999", Plugins: []string{"tanka"},
		Tools: []toolSpec{{Name: "tk", Module: "test/e2e/tools/tanka", Pkg: "github.com/grafana/tanka/cmd/tk", VersionVar: "TANKA_VERSION",
			Strip: true, VersionSymbol: "github.com/grafana/tanka/pkg/tanka.CurrentVersion", License: "Apache-2.0"}}},
	// ytt in its tools module (go install cannot read its version list), with its
	// release build's version symbol and no stripping, as its .goreleaser.yml builds it.
	{Name: "cmp-ytt", Cmd: "./cmd/cmp-server", Bin: "cmp-server", User: "999:999", Plugins: []string{"ytt"},
		Tools: []toolSpec{{Name: "ytt", Module: "test/e2e/tools/ytt", Pkg: "carvel.dev/ytt/cmd/ytt", VersionVar: "YTT_VERSION",
			PinSymbols: []pinSymbol{{"carvel.dev/ytt/pkg/version.Version", "YTT_VERSION_NUMBER"}}, License: "Apache-2.0"}}},
	// argocd-vault-plugin on plain manifests, charts and kustomizations (cmp-server
	// avp): AVP in its tools module (go install cannot read its version list), and
	// the helm and kustomize the other images hold.
	{Name: "cmp-argocd-vault-plugin", Cmd: "./cmd/cmp-server", Bin: "cmp-server", User: "999:999", Plugins: []string{"argocd-vault-plugin"},
		Tools: []toolSpec{{Name: "argocd-vault-plugin", Module: "test/e2e/tools/argocd-vault-plugin", Pkg: "github.com/argoproj-labs/argocd-vault-plugin",
			VersionVar: "AVP_VERSION", Strip: true, VersionSymbol: "github.com/argoproj-labs/argocd-vault-plugin/version.Version", License: "Apache-2.0"},
			helmTool, {Name: "kustomize", PkgVar: "KUSTOMIZE_PKG", VersionVar: "KUSTOMIZE_VERSION", License: "Apache-2.0"}}},
	// cdk8s on Node.js from Debian and cdk8s-cli from npm (rootfs.go); the
	// plugin server is the one Go binary.
	{Name: "cmp-cdk8s", Cmd: "./cmd/cmp-server", Bin: "cmp-server", User: "999:999", Plugins: []string{"cdk8s"}, Rootfs: &cdk8sRootfs},
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
	// RootfsPins are each rootfs's labelled pins (name → where from), and
	// RootfsLicenses its npm packages' licences, keyed by rootfsSpec.Name.
	RootfsPins     map[string]map[string]string
	RootfsLicenses map[string][]string
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
		return nil, fmt.Errorf("go build %s for %s/%s: %w\n%s", spec.Cmd, p.OS, p.Architecture, err, out)
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
	for _, t := range spec.Tools {
		built, err := buildTool(ctx, b, t, p)
		if err != nil {
			return nil, err
		}
		layer, err := fileLayer(built.File, t.Name, b.Epoch)
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.Addendum{Layer: layer, History: v1.History{Created: v1.Time{Time: b.Epoch},
			CreatedBy: "cmp-injector hack/images: " + built.How, Comment: t.Name}})
	}
	if spec.Rootfs != nil {
		more, err := rootfsAddenda(ctx, b, *spec.Rootfs, p.Architecture)
		if err != nil {
			return nil, err
		}
		adds = append(adds, more...)
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
// image names its plugins, each tool's pin and the tools' licences too.
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
	if len(spec.Tools) == 0 && spec.Rootfs == nil {
		return l
	}
	licences := []string{"Apache-2.0"}
	var tools, dirs []string
	for _, t := range spec.Tools {
		if !slices.Contains(licences, t.License) {
			licences = append(licences, t.License)
		}
		pkg, version := b.pin(t)
		tools = append(tools, fmt.Sprintf("%s %s built from %s", t.Name, version, pkg))
		l[toolLabelPrefix+t.Name] = pkg + "@" + version
	}
	if r := spec.Rootfs; r != nil {
		for name, pin := range b.RootfsPins[r.Name] {
			l[toolLabelPrefix+name] = pin
			tools = append(tools, name+" "+pin)
		}
		slices.Sort(tools)
		for _, lic := range append(slices.Clone(r.DebianLicenses), b.RootfsLicenses[r.Name]...) {
			if !slices.Contains(licences, lic) {
				licences = append(licences, lic)
			}
		}
	}
	for _, p := range spec.Plugins {
		dirs = append(dirs, "deploy/plugins/"+p)
	}
	l["org.opencontainers.image.licenses"] = strings.Join(licences, " AND ")
	l["org.opencontainers.image.description"] = fmt.Sprintf("cmp-injector's %s plugin image (%s): cmp-server and %s",
		strings.Join(spec.Plugins, " and "), strings.Join(dirs, ", "), strings.Join(tools, ", "))
	return l
}

// toolLabelPrefix plus a tool's name labels its Go package and version.
const toolLabelPrefix = "io.cmp-injector.tool."

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
