package helmplugin

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/params"
)

// testTimeout bounds every helm run a test starts.
const testTimeout = 2 * time.Minute

// helmBinary is the pinned helm the tests run: $HELM, else <repo root>/bin/helm.
func helmBinary(t testing.TB) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
	h := filepath.Join(dir, "bin", "helm")
	if _, err := os.Stat(h); err != nil {
		t.Fatalf("helm not found at %s: run hack/tools.sh helm (or set HELM)", h)
	}
	return h
}

func chartDir(t testing.TB, name string) string {
	t.Helper()
	d, err := filepath.Abs(filepath.Join("testdata", "charts", name))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// baseEnv is the env a sidecar would give: helm on PATH, private writable dirs, the
// build env of an app "myapp" deploying to "ns".
func baseEnv(t testing.TB) map[string]string {
	t.Helper()
	home := t.TempDir()
	return map[string]string{
		"PATH":                       filepath.Dir(helmBinary(t)),
		"HOME":                       home,
		"HELM_CACHE_HOME":            filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME":           filepath.Join(home, "config"),
		"HELM_DATA_HOME":             filepath.Join(home, "data"),
		"TMPDIR":                     t.TempDir(),
		"ARGOCD_APP_NAME":            "myapp",
		"ARGOCD_APP_NAMESPACE":       "ns",
		"ARGOCD_APP_PROJECT_NAME":    "default",
		"KUBE_VERSION":               "1.29.3",
		"KUBE_API_VERSIONS":          "example.com/v1,apps/v1",
		"ARGOCD_APP_SOURCE_PATH":     ".",
		"ARGOCD_APP_SOURCE_REPO_URL": "https://git.example.com/repo.git",
	}
}

func withParams(t testing.TB, env map[string]string, ps []params.AppParameter) map[string]string {
	t.Helper()
	enc, err := params.Encode(ps)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string, len(env)+1)
	for k, v := range env {
		out[k] = v
	}
	out[keys.EnvAppParameters] = enc
	return out
}

// runPlugin runs generateManifests or announceParameters and returns stdout, stderr and the error.
func runPlugin(t testing.TB, fn func(context.Context, helmRequest) error, dir, root string, env map[string]string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := fn(ctx, helmRequest{Env: env, AppDir: dir, RepoRoot: root, Stdout: &stdout, Stderr: &stderr})
	return stdout.String(), stderr.String(), err
}

// helmByHand runs helm with the given arguments in dir, as a person would.
func helmByHand(t testing.TB, dir string, env map[string]string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, helmBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = envList(env)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %q: %v: %s", args, err, stderr.String())
	}
	return stdout.String()
}

func str(s string) *string { return &s }

// copyTree copies a fixture so a test can add files or symlinks around it.
func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
