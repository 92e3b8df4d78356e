package main

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"sigs.k8s.io/yaml"
)

// TestImages builds every image, and those of reproSpecs again, and checks
// what a registry, a runtime and a user would: valid OCI, the same digests
// from the same commit, the user, entrypoint and labels, a binary that runs,
// and tags that agree with the chart and the example catalog.
func TestImages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds four binaries")
	}
	b, err := newBuildInfo("ghcr.io/cmp-injector", "")
	if err != nil {
		t.Fatal(err)
	}
	var runs [2][]built
	for i, these := range [][]imageSpec{specs, reproSpecs(t)} {
		b.WorkDir = t.TempDir()
		if runs[i], err = buildSpecs(context.Background(), b, filepath.Join(t.TempDir(), "out"), these); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range runs[0] {
		for _, again := range runs[1] {
			if again.Ref == r.Ref && again.Index != r.Index {
				t.Errorf("%s: two builds of one commit differ: %s and %s", r.Ref, r.Index, again.Index)
			}
		}
		t.Logf("%s", r)
	}

	for i, spec := range specs {
		r := runs[0][i]
		t.Run(spec.Name, func(t *testing.T) {
			if want := "ghcr.io/cmp-injector/" + spec.Name + ":" + b.Tag; r.Ref != want {
				t.Errorf("ref %s, want %s", r.Ref, want)
			}
			// The OCI layout: a valid multi-platform index.
			dir := untar(t, r.Files[0])
			lp, err := layout.FromPath(dir)
			if err != nil {
				t.Fatal(err)
			}
			outer, err := lp.ImageIndex()
			if err != nil {
				t.Fatal(err)
			}
			im, err := outer.IndexManifest()
			if err != nil || len(im.Manifests) != 1 || im.Manifests[0].Annotations["io.containerd.image.name"] != r.Ref {
				t.Fatalf("index.json does not name %s: %+v %v", r.Ref, im, err)
			}
			idx, err := outer.ImageIndex(im.Manifests[0].Digest)
			if err != nil {
				t.Fatal(err)
			}
			if err := validate.Index(idx); err != nil {
				t.Errorf("OCI index invalid: %v", err)
			}
			// Each docker-save tarball: a valid image with our config.
			for _, f := range r.Files[1:] {
				img, err := tarball.ImageFromPath(f, nil)
				if err != nil {
					t.Fatal(err)
				}
				if err := validate.Image(img); err != nil {
					t.Errorf("%s invalid: %v", f, err)
				}
				cfg, err := img.ConfigFile()
				if err != nil {
					t.Fatal(err)
				}
				c := cfg.Config
				if c.User != spec.User || strings.HasPrefix(c.User, "0") || len(c.Entrypoint) != 1 || c.Entrypoint[0] != "/usr/local/bin/"+spec.Bin {
					t.Errorf("%s: user %q entrypoint %q", f, c.User, c.Entrypoint)
				}
				for k, v := range map[string]string{"org.opencontainers.image.source": "https://github.com/cmp-injector/cmp-injector",
					"org.opencontainers.image.version": b.Version, "org.opencontainers.image.revision": b.Revision} {
					if c.Labels[k] != v {
						t.Errorf("%s: label %s = %q, want %q", f, k, c.Labels[k], v)
					}
				}
				files := listFiles(t, mutate.Extract(img))
				for _, want := range []string{"etc/ssl/certs/ca-certificates.crt", "etc/passwd", "etc/group", "tmp", "usr/local/bin/" + spec.Bin} {
					if _, ok := files[want]; !ok {
						t.Errorf("%s lacks %s", f, want)
					}
				}
				if !strings.Contains(string(files["etc/passwd"]), ":"+strings.Split(spec.User, ":")[0]+":") {
					t.Errorf("%s: /etc/passwd has no entry for %s", f, spec.User)
				}
				if cfg.Architecture != "amd64" {
					continue
				}
				// The binary from the image runs here and reports the build's version.
				bin := filepath.Join(t.TempDir(), spec.Bin)
				if err := os.WriteFile(bin, files["usr/local/bin/"+spec.Bin], 0o755); err != nil {
					t.Fatal(err)
				}
				out, err := exec.Command(bin, "version").CombinedOutput()
				if err != nil || !strings.Contains(string(out), b.Version) {
					t.Errorf("%s version: %v %s (want %s)", spec.Bin, err, out, b.Version)
				}
				for _, tool := range spec.Tools {
					checkTool(t, b, tool, c.Labels, files)
				}
				if spec.Rootfs != nil {
					checkRootfs(t, b, *spec.Rootfs, c.Labels, files)
					renderInRootfs(t, img, *spec.Rootfs)
				}
			}
		})
	}
	checkPluginCatalog(t, b, runs[0])

	// The chart deploys the tag built here, and the example catalog's copy
	// container runs the cmp-server image of the same tag.
	catalog, err := os.ReadFile(filepath.Join(b.Root, "deploy", "plugins", "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cat struct {
		Defaults struct {
			CopyImage string `json:"copyImage"`
		} `json:"defaults"`
	}
	if err := yaml.Unmarshal(catalog, &cat); err != nil {
		t.Fatal(err)
	}
	if want := runs[0][1].Ref; cat.Defaults.CopyImage != want {
		t.Errorf("deploy/plugins/catalog.yaml copyImage %s, want the built %s", cat.Defaults.CopyImage, want)
	}
	values, err := os.ReadFile(filepath.Join(b.Root, "charts", "cmp-injector", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, repo := range []string{"ghcr.io/cmp-injector/cmp-injector", "ghcr.io/cmp-injector/cmp-server"} {
		if !strings.Contains(string(values), "repository: "+repo) {
			t.Errorf("chart values do not use %s", repo)
		}
	}
}

func untar(t *testing.T, file string) string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := unpackImage(f, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// listFiles reads a flattened image filesystem: path → content.
func listFiles(t *testing.T, rc io.ReadCloser) map[string][]byte {
	t.Helper()
	defer rc.Close()
	out := map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[strings.TrimSuffix(h.Name, "/")] = b
	}
}

// checkTool: a plugin image's tool is hack/tools.sh's build of the pin, byte
// for byte (so the tests, which run bin/'s, test what the image ships), and
// its labels name it.
func checkTool(t *testing.T, b buildInfo, tool toolSpec, labels map[string]string, files map[string][]byte) {
	t.Helper()
	pkg, version := b.pin(tool)
	pin := pkg + "@" + version
	if labels[toolLabelPrefix+tool.Name] != pin || !strings.Contains(labels["org.opencontainers.image.licenses"], tool.License) {
		t.Errorf("%s: labels %v, want %s=%s and licence %s", tool.Name, labels, toolLabelPrefix+tool.Name, pin, tool.License)
	}
	data, ok := files["usr/local/bin/"+tool.Name]
	if !ok {
		t.Fatalf("the image lacks usr/local/bin/%s", tool.Name)
	}
	local, err := os.ReadFile(filepath.Join(b.Root, "bin", tool.Name))
	if err != nil {
		t.Fatalf("%v: run hack/tools.sh %s", err, tool.Name)
	}
	if !bytes.Equal(data, local) {
		t.Errorf("the image's %s (%d bytes) differs from bin/%s (%d bytes), hack/tools.sh's build of %s", tool.Name, len(data), tool.Name, len(local), pin)
	}
}

// checkPluginCatalog: each plugin image is what the example catalog's entry
// of its plugin runs and allows.
func checkPluginCatalog(t *testing.T, b buildInfo, built []built) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(b.Root, "deploy", "plugins", "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cat struct {
		Plugins map[string]struct {
			Image         string   `json:"image"`
			AllowedImages []string `json:"allowedImages"`
		} `json:"plugins"`
	}
	if err := yaml.Unmarshal(data, &cat); err != nil {
		t.Fatal(err)
	}
	for i, spec := range specs {
		repo, _, _ := strings.Cut(built[i].Ref, ":")
		for _, plugin := range spec.Plugins {
			e, ok := cat.Plugins[plugin]
			if !ok || e.Image != built[i].Ref || !slices.Contains(e.AllowedImages, repo+":*") {
				t.Errorf("deploy/plugins/catalog.yaml plugins.%s: image %q allowedImages %q, want the built %s and %s:*",
					plugin, e.Image, e.AllowedImages, built[i].Ref, repo)
			}
		}
	}
}

// TestCatalogServerPaths: the example catalog's serverPath, by which a pod of
// library plugins gets no copy init container, is where each plugin image
// holds cmp-server (TestImages checks that the file is there and runs), and
// no entry whose image is not built here claims one. The quick check,
// without a build.
func TestCatalogServerPaths(t *testing.T) {
	root, err := gitOut("", "rev-parse", "--show-toplevel")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "deploy", "plugins", "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cat struct {
		Plugins map[string]struct {
			ServerPath string `json:"serverPath"`
		} `json:"plugins"`
	}
	if err := yaml.Unmarshal(data, &cat); err != nil {
		t.Fatal(err)
	}
	built := map[string]string{} // plugin → the path of cmp-server in its image
	for _, spec := range specs {
		for _, plugin := range spec.Plugins {
			if spec.Bin != "cmp-server" {
				t.Fatalf("image %s of plugin %s runs %s, not cmp-server", spec.Name, plugin, spec.Bin)
			}
			built[plugin] = "/" + binDir + "/" + spec.Bin
		}
	}
	for name, e := range cat.Plugins {
		if want := built[name]; e.ServerPath != want {
			t.Errorf("deploy/plugins/catalog.yaml plugins.%s: serverPath %q, want %q (the image built here carries it there; none for an image not built here)",
				name, e.ServerPath, want)
		}
	}
}

// TestToolBuildsMatchToolsSh: each plugin image's tool is built as
// hack/tools.sh's build_<tool> builds it for bin/ (same package or tools
// module, same ldflags), which TestImages then checks byte for byte. This is
// the quick check of the two descriptions, without a build.
func TestToolBuildsMatchToolsSh(t *testing.T) {
	b, err := newBuildInfo("ghcr.io/cmp-injector", "")
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(b.Root, "hack", "tools.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range specs {
		for _, tool := range spec.Tools {
			fn := "build_" + strings.ReplaceAll(tool.Name, "-", "_") + "() {"
			_, body, ok := strings.Cut(string(script), fn)
			if !ok {
				t.Errorf("%s: hack/tools.sh has no %s", spec.Name, fn)
				continue
			}
			body, _, _ = strings.Cut(body, "\n}")
			body, _, _ = strings.Cut(body, "; }\n")
			var want []string
			if tool.Module != "" {
				want = append(want, `cd "$ROOT/`+tool.Module+`"`, "go build -trimpath", " "+tool.Pkg)
			} else {
				want = append(want, "go install -trimpath", `"$`+tool.PkgVar+`@$2"`)
			}
			if flags := tool.ldflags("$2", func(name string) string { return "$" + name }); flags != "" {
				if !strings.Contains(body, `-ldflags "`+flags+`"`) && !strings.Contains(body, `-ldflags '`+flags+`'`) {
					want = append(want, "-ldflags '"+flags+"'")
				}
			} else if strings.Contains(body, "-ldflags") {
				t.Errorf("%s: hack/tools.sh builds %s with -ldflags, hack/images without:\n%s", spec.Name, tool.Name, body)
			}
			for _, w := range want {
				if !strings.Contains(body, w) {
					t.Errorf("%s: hack/tools.sh's %s lacks %s, which hack/images builds %s with:\n%s", spec.Name, fn, w, tool.Name, body)
				}
			}
			if pkg, version := b.pin(tool); pkg == "" || version == "" {
				t.Errorf("%s: no pin for %s (%s%s, %s) in hack/versions.sh", spec.Name, tool.Name, tool.PkgVar, tool.Pkg, tool.VersionVar)
			}
		}
	}
}

// TestToolFromModule builds a tool the way a plugin image builds one whose
// go.mod has a replace block (helmfile): go build in its tools module. The
// tool here is promtool (test/observability/promtool, for the same reason),
// which hack/tools.sh builds that way for bin/: the two must be byte for byte
// the same, and a pin the module does not require must be refused.
func TestToolFromModule(t *testing.T) {
	if testing.Short() {
		t.Skip("links promtool")
	}
	b, err := newBuildInfo("ghcr.io/cmp-injector", "")
	if err != nil {
		t.Fatal(err)
	}
	b.WorkDir = t.TempDir()
	tool := toolSpec{Name: "promtool", Module: "test/observability/promtool", Pkg: "github.com/prometheus/prometheus/cmd/promtool",
		VersionVar: "PROMETHEUS_VERSION", Strip: true, License: "Apache-2.0"}
	amd64 := v1.Platform{OS: "linux", Architecture: "amd64"}
	built, err := buildTool(context.Background(), b, tool, amd64)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(built.File)
	if err != nil {
		t.Fatal(err)
	}
	local, err := os.ReadFile(filepath.Join(b.Root, "bin", "promtool"))
	if err != nil {
		t.Fatalf("%v: run hack/tools.sh promtool", err)
	}
	if !bytes.Equal(data, local) {
		t.Errorf("%s built %d bytes, bin/promtool (hack/tools.sh) has %d", built.How, len(data), len(local))
	}
	b.Pins["PROMETHEUS_VERSION"] = "v0.1.0"
	if _, err := buildTool(context.Background(), b, tool, amd64); err == nil || !strings.Contains(err.Error(), "requires v0.315.0, hack/versions.sh pins PROMETHEUS_VERSION v0.1.0") {
		t.Errorf("a pin the module does not require: err %v", err)
	}
}

// reproSpecs are the images TestImages builds a second time to prove a
// build reproducible: one of each way an image is made (the product image,
// tools from go install and from a tools module, a Debian and npm runtime).
// Every image goes through the same builder and layer writer, so one of each
// kind stands for the rest. Building all of them twice was half of make
// test's unit-long, which the library grows by one image per plugin.
func reproSpecs(t *testing.T) []imageSpec {
	t.Helper()
	var out []imageSpec
	for _, s := range specs {
		if slices.Contains([]string{"cmp-server", "cmp-kustomize", "cmp-tanka", "cmp-cdk8s"}, s.Name) {
			out = append(out, s)
		}
	}
	if len(out) != 4 {
		t.Fatalf("reproSpecs found %d of its 4 images in specs", len(out))
	}
	return out
}
