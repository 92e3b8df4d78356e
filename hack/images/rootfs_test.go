package main

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// checkRootfs: a plugin image's runtime is hack/tools.sh's tree for bin/
// (hack/images -rootfs), file for file and byte for byte, so the tests that
// run bin/ test what the image ships; its labels name the pins.
func checkRootfs(t *testing.T, b buildInfo, spec rootfsSpec, labels map[string]string, files map[string][]byte) {
	t.Helper()
	for name, pin := range b.RootfsPins[spec.Name] {
		if labels[toolLabelPrefix+name] != pin {
			t.Errorf("label %s%s = %q, want %q", toolLabelPrefix, name, labels[toolLabelPrefix+name], pin)
		}
	}
	link, err := filepath.EvalSymlinks(filepath.Join(b.Root, "bin", spec.Name))
	if err != nil {
		t.Fatalf("%v: run hack/tools.sh %s", err, spec.Name)
	}
	root := filepath.Join(filepath.Dir(link), "rootfs")
	n := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, root+string(filepath.Separator)))
		data, ok := files[rel]
		switch {
		case !ok:
			t.Errorf("bin/%s's tree has %s, the image has not", spec.Name, rel)
		case d.Type().IsRegular():
			local, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if !bytes.Equal(local, data) {
				t.Errorf("%s differs between the image and bin/%s's tree", rel, spec.Name)
			}
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, top := range []string{"usr/bin/node", spec.Modules + "/cdk8s-cli/package.json", "lib/x86_64-linux-gnu/libc.so.6", "bin/sh"} {
		if _, ok := files[top]; !ok {
			t.Errorf("the image lacks %s", top)
		}
	}
	t.Logf("%s: %d files of bin/%s's tree in the image", spec.Name, n, spec.Name)
}

// renderInRootfs renders the library's test app with the amd64 image's own
// filesystem: unpacked into a directory and entered with chroot as Argo CD's
// UID 999, cmp-server's cdk8s plugin runs the image's Node.js on the
// image's glibc, its /bin/sh and its npx, as a container runtime would run
// it. chroot needs root; elsewhere the test says so and skips this part.
func renderInRootfs(t *testing.T, img v1.Image, spec rootfsSpec) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Logf("not root: the image's %s runtime is not run under chroot here", spec.Name)
		return
	}
	dir := t.TempDir()
	if err := unpackImage(mutate.Extract(img), dir); err != nil {
		t.Fatal(err)
	}
	// A runtime mounts /dev; Go's exec opens /dev/null for a command's unset
	// stdin, so the chroot gets that one node.
	if err := os.MkdirAll(filepath.Join(dir, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mknod(filepath.Join(dir, "dev", "null"), syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "dev", "null"), 0o666); err != nil {
		t.Fatal(err)
	}
	app := filepath.Join(dir, "app")
	if err := os.CopyFS(app, os.DirFS(filepath.Join("..", "..", "deploy", "plugins", "testdata", "cdk8s", "hello"))); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("chroot", "--userspec=999:999", dir, "/bin/sh", "-c", "cd /app && exec /usr/local/bin/cmp-server cdk8s generate")
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", `ARGOCD_APP_PARAMETERS=[{"name":"env","map":{"REPLICAS":"2"}}]`}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("cmp-server cdk8s generate in the image's filesystem: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{"kind: Deployment", "replicas: 2", "kind: Service", "image: paulbouwer/hello-kubernetes:1.10"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the image's render lacks %q:\n%s\nstderr:\n%s", want, stdout.String(), stderr.String())
		}
	}
}

// unpackImage writes a tar (a flattened image filesystem, an OCI layout)
// into dir: directories,
// files with their modes and symbolic links, owned by the caller.
func unpackImage(rc io.ReadCloser, dir string) error {
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.FromSlash(strings.TrimSuffix(h.Name, "/")))
		if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			if err := os.Chmod(p, fs.FileMode(h.Mode&0o7777)|fs.ModeDir); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, p); err != nil {
				return err
			}
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				return err
			}
			if err := os.WriteFile(p, data, fs.FileMode(h.Mode&0o777)); err != nil {
				return err
			}
		}
	}
}

// TestCdk8sPins: hack/versions.sh's CDK8S_CLI_VERSION is the cdk8s-cli the
// tools' package.json asks for and its lockfile installs, and the Debian
// lock pins Node.js for every platform of the index.
func TestCdk8sPins(t *testing.T) {
	root := filepath.Join("..", "..")
	pins, err := readPins(root)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := readRootfsPins(root, cdk8sRootfs)
	if err != nil {
		t.Fatal(err)
	}
	if want := "npm:cdk8s-cli@" + pins["CDK8S_CLI_VERSION"]; got["cdk8s-cli"] != want {
		t.Errorf("tools/package.json has %s, hack/versions.sh pins %s", got["cdk8s-cli"], want)
	}
	lock, err := os.ReadFile(filepath.Join(root, cdk8sRootfs.Dir, "tools", "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(lock), `"node_modules/cdk8s-cli": {
      "version": "`+pins["CDK8S_CLI_VERSION"]+`"`) {
		t.Errorf("tools/package-lock.json does not install cdk8s-cli %s: run npm install --package-lock-only there", pins["CDK8S_CLI_VERSION"])
	}
	for _, p := range platforms {
		debs, err := readDebianLock(filepath.Join(root, cdk8sRootfs.Dir, "debian.lock"), p.Architecture)
		if err != nil {
			t.Fatal(err)
		}
		var node string
		for _, d := range debs {
			if d.Package == "nodejs" {
				node = d.Version
			}
		}
		if node == "" || "debian:nodejs="+node != got["node"] {
			t.Errorf("%s: debian.lock pins nodejs %q, the labels say %q", p.Architecture, node, got["node"])
		}
	}
}
