package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/cmp-injector/cmp-injector/hack/images/oci"
)

// The real node pulls nothing: every image a scenario runs is built here from
// files on this machine, with the same layer code as `make images`, and
// imported into the node's containerd.

// ImageKind is one kind of test image; the test names the references it runs
// under (an image may carry several tags).
type ImageKind string

const (
	// PauseImage is the pod sandbox (test/e2e/cmd/pause).
	PauseImage ImageKind = "pause"
	// ShellImage is Debian's busybox-static: sh and the usual tools.
	ShellImage ImageKind = "shell"
	// ArgoCDImage is Argo CD's image as far as the repo-server, copyutil and
	// a plugin sidecar use it: the argocd multi-call binary with its links and
	// scripts, helm, kustomize, Debian's git and the shell; it runs as 999.
	ArgoCDImage ImageKind = "argocd"
)

// imageEpoch is every timestamp in test images: fixed, so layers are the same
// from run to run.
var imageEpoch = time.Unix(1700000000, 0).UTC()

// BuildTestImages writes one archive per kind into dir, tagged with every
// reference in refs[kind], and returns the archive paths. argo is the release
// whose argocd binary the Argo CD image holds.
func BuildTestImages(ctx context.Context, dir string, refs map[ImageKind][]string, argo ArgoRelease) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	for _, kind := range []ImageKind{PauseImage, ShellImage, ArgoCDImage} {
		if len(refs[kind]) == 0 {
			continue
		}
		img, err := buildTestImage(ctx, dir, kind, argo)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", kind, err)
		}
		tags := map[name.Reference]v1.Image{}
		for _, r := range refs[kind] {
			ref, err := name.NewTag(r)
			if err != nil {
				return nil, err
			}
			tags[ref] = img
		}
		file := filepath.Join(dir, string(kind)+".tar")
		if err := tarball.MultiRefWriteToFile(file, tags); err != nil {
			return nil, err
		}
		files = append(files, file)
	}
	return files, nil
}

func buildTestImage(ctx context.Context, dir string, kind ImageKind, argo ArgoRelease) (v1.Image, error) {
	cfg := v1.Config{Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin"}, WorkingDir: "/"}
	var files []oci.Entry
	var err error
	switch kind {
	case PauseImage:
		root, rerr := RepoRoot()
		if rerr != nil {
			return nil, rerr
		}
		bin := filepath.Join(dir, "pause")
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./test/e2e/cmd/pause")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, berr := cmd.CombinedOutput(); berr != nil {
			return nil, fmt.Errorf("go build ./test/e2e/cmd/pause: %w\n%s", berr, out)
		}
		files, err = hostFiles(map[string]string{"pause": bin})
		cfg.Entrypoint = []string{"/pause"}
	case ShellImage:
		files, err = busybox()
	case ArgoCDImage:
		files, err = argoFiles(argo)
		cfg.User = "999"
		cfg.Env = append(cfg.Env, "HOME=/home/argocd", "USER=argocd")
	}
	if err != nil {
		return nil, err
	}
	layer, err := oci.Layer(append(oci.Base(), files...), imageEpoch)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created, cf.Config = "linux", "amd64", v1.Time{Time: imageEpoch}, cfg
	return mutate.ConfigFile(img, cf)
}

// argoFiles are what Argo CD's image has at the paths its manifests use.
func argoFiles(argo ArgoRelease) ([]oci.Entry, error) {
	host := map[string]string{
		"usr/bin/git":          "/usr/bin/git",
		"usr/lib/git-core/git": "/usr/lib/git-core/git",
	}
	for dst, tool := range map[string]string{"argocd": argo.Tool, "helm": "helm", "kustomize": "kustomize"} {
		p, err := toolFile(tool)
		if err != nil {
			return nil, err
		}
		host["usr/local/bin/"+dst] = p
	}
	real := host["usr/local/bin/argocd"]
	for _, s := range []string{"git-verify-wrapper.sh", "gpg-wrapper.sh"} {
		host["usr/local/bin/"+s] = filepath.Join(filepath.Dir(real), s)
	}
	files, err := withShell(host)
	if err != nil {
		return nil, err
	}
	// The image links each Argo CD component's name to the multi-call binary.
	for _, l := range []string{"argocd-repo-server", "argocd-cmp-server", "argocd-server"} {
		files = append(files, oci.Entry{Path: "usr/local/bin/" + l, Link: "argocd"})
	}
	// git runs its helpers (git-upload-pack for a file:// remote) from git-core,
	// where Debian links them to git.
	links, err := os.ReadDir("/usr/lib/git-core")
	if err != nil {
		return nil, err
	}
	for _, l := range links {
		p := "/usr/lib/git-core/" + l.Name()
		if target, err := os.Readlink(p); err == nil && target == "git" {
			files = append(files, oci.Entry{Path: "usr/lib/git-core/" + l.Name(), Link: "git"})
		}
	}
	return files, nil
}

// withShell is busybox plus the host files given (image path → host path).
func withShell(host map[string]string) ([]oci.Entry, error) {
	bb, err := busybox()
	if err != nil {
		return nil, err
	}
	files, err := hostFiles(host)
	if err != nil {
		return nil, err
	}
	return append(bb, files...), nil
}

// busybox is Debian's static busybox with a link in /bin for every applet.
func busybox() ([]oci.Entry, error) {
	const bin = "/bin/busybox"
	files, err := hostFiles(map[string]string{"bin/busybox": bin})
	if err != nil {
		return nil, fmt.Errorf("%w (hack/tools.sh busybox installs Debian's busybox-static)", err)
	}
	out, err := exec.Command(bin, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("busybox --list: %w", err)
	}
	for _, applet := range strings.Fields(string(out)) {
		if applet != "busybox" {
			files = append(files, oci.Entry{Path: "bin/" + applet, Link: "busybox"})
		}
	}
	return files, nil
}

// hostFiles reads host files into entries (image path → host path), adding
// the shared libraries and loader each dynamically linked one needs, at the
// paths ldd reports.
func hostFiles(host map[string]string) ([]oci.Entry, error) {
	paths := make([]string, 0, len(host))
	for p := range host {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	seen := map[string]bool{}
	var out []oci.Entry
	add := func(imagePath, hostPath string) error {
		if seen[imagePath] {
			return nil
		}
		seen[imagePath] = true
		data, err := os.ReadFile(hostPath)
		if err != nil {
			return err
		}
		fi, err := os.Stat(hostPath)
		if err != nil {
			return err
		}
		out = append(out, oci.Entry{Path: imagePath, Mode: int64(fi.Mode().Perm()), Data: data})
		return nil
	}
	for _, p := range paths {
		if err := add(p, host[p]); err != nil {
			return nil, err
		}
		libs, err := sharedLibraries(host[p])
		if err != nil {
			return nil, err
		}
		for _, l := range libs {
			if err := add(strings.TrimPrefix(l, "/"), l); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// sharedLibraries lists what ldd says path loads; none for a static binary or
// a script.
func sharedLibraries(path string) ([]string, error) {
	out, err := exec.Command("ldd", path).CombinedOutput()
	if err != nil {
		// "not a dynamic executable": static, or a script.
		return nil, nil
	}
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			libs = append(libs, f[2])
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			libs = append(libs, f[0])
		}
	}
	return libs, nil
}

// toolFile is bin/name resolved to the cached file it links to.
func toolFile(name string) (string, error) {
	p, err := Tool(name)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(p)
}

// BuildProductImages runs `make images`' own builder (hack/images) for the
// node's platform only and returns the archive of every image it built:
// cmp-server, cmp-injector and the plugin library's images, which the example
// catalog's entries run (cmp-helm, cmp-kustomize, ...).
func BuildProductImages(ctx context.Context, dir string) ([]string, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "go", "run", "./hack/images", "--out", dir, "--platform", "linux/amd64")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go run ./hack/images: %w\n%s", err, out)
	}
	archives, err := filepath.Glob(filepath.Join(dir, "*-linux-amd64.tar"))
	if err == nil && len(archives) == 0 {
		err = fmt.Errorf("go run ./hack/images wrote no *-linux-amd64.tar into %s", dir)
	}
	return archives, err
}
