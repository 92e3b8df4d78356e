package client

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/params"
)

// The tarball must look like the one Argo CD's repo-server sends.
func TestWriteTarballFormat(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"b", "a/c", ".git"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"b/z.yaml", "a/c/x", "a/y", ".git/HEAD"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../b/z.yaml", filepath.Join(root, "a", "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	tgz, err := WriteTarball(root, t.TempDir(), []string{".git/*"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(tgz.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if gz.Name != "" || !gz.ModTime.IsZero() {
		t.Errorf("gzip header carries name %q / mtime %v", gz.Name, gz.ModTime)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entry := hdr.Name + ":" + string(hdr.Typeflag)
		if hdr.Typeflag == tar.TypeSymlink {
			entry += ">" + hdr.Linkname
		}
		names = append(names, entry)
	}
	want := []string{".:5", ".git:5", "a:5", "a/c:5", "a/c/x:0", "a/link:2>../b/z.yaml", "a/y:0", "b:5", "b/z.yaml:0"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("entries %q\nwant    %q", names, want)
	}
	if tgz.Files != 3 || tgz.Size == 0 || len(tgz.Checksum) != 64 {
		t.Errorf("tarball %+v", tgz)
	}
	if _, err := WriteTarball(t.TempDir(), "", nil); err == nil || !strings.Contains(err.Error(), "no files to send(") {
		t.Errorf("empty tree: %v", err)
	}
}

func TestAppEnviron(t *testing.T) {
	s := "hello world"
	env, err := App{
		Name: "demo-app", Namespace: "ns", Project: "p", Revision: "0123456789abcdef", RepoURL: "https://r",
		SourcePath: "apps/demo", TargetRevision: "main", KubeVersion: "v1.29.3", KubeAPIVersions: []string{"v1", "apps/v1"},
		PluginEnv:  []string{"FOO=bar-$ARGOCD_APP_NAME-$$-${KUBE_VERSION}-$UNKNOWN", "helm_args=a=b"},
		Parameters: []params.AppParameter{{Name: "my-string.param", String: &s}}, HasPlugin: true,
	}.Environ()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"ARGOCD_APP_NAME=demo-app", "ARGOCD_APP_NAMESPACE=ns", "ARGOCD_APP_PROJECT_NAME=p",
		"ARGOCD_APP_REVISION=0123456789abcdef", "ARGOCD_APP_REVISION_SHORT=0123456", "ARGOCD_APP_REVISION_SHORT_8=01234567",
		"ARGOCD_APP_SOURCE_REPO_URL=https://r", "ARGOCD_APP_SOURCE_PATH=apps/demo", "ARGOCD_APP_SOURCE_TARGET_REVISION=main",
		"KUBE_VERSION=1.29.3", "KUBE_API_VERSIONS=v1,apps/v1",
		"ARGOCD_ENV_FOO=bar-demo-app-$-1.29.3-", "ARGOCD_ENV_helm_args=a=b",
		`ARGOCD_APP_PARAMETERS=[{"name":"my-string.param","string":"hello world"}]`, "PARAM_MY_STRING_PARAM=hello world",
	}
	if !reflect.DeepEqual(env, want) {
		t.Errorf("env %q\nwant %q", env, want)
	}
	env, _ = App{HasPlugin: true}.Environ()
	if env[len(env)-1] != "ARGOCD_APP_PARAMETERS=null" {
		t.Errorf("plugin: {} must send null, got %q", env[len(env)-1])
	}
}
