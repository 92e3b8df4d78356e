package playground

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/cmp-injector/cmp-injector/cmpserver/helmplugin"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// TestMain lets the Helm example plugin run this test binary: its commands
// name /var/run/argocd/cmp-server, which the runner maps to the running
// executable, so `<test binary> helm generate` must be the helm plugin.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "helm" {
		p := serving.Program{Name: "cmp-server", Commands: []serving.Command{helmplugin.Command}}
		os.Exit(p.Main(context.Background(), os.Args[1:], serving.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}))
	}
	os.Exit(m.Run())
}

// helmPlugin is the Helm example plugin's plugin.yaml, as shipped.
func helmPlugin(t testing.TB) string {
	return filepath.Join(harness.MustRepoRoot(t), "deploy", "plugins", "helm", "plugin.yaml")
}

// withHelm puts the pinned helm first on PATH for the plugin commands.
func withHelm(t testing.TB) {
	helm := harness.MustTool(t, "helm")
	t.Setenv("PATH", filepath.Dir(helm)+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// copyChart copies testdata/chart to a fresh dir the test may edit.
func copyChart(t testing.TB) string {
	dst := filepath.Join(t.TempDir(), "chart")
	if err := os.CopyFS(dst, os.DirFS(filepath.Join("testdata", "chart"))); err != nil {
		t.Fatal(err)
	}
	return dst
}

// appDir is an app dir holding one file: the repo-server sends nothing (and
// fails) for a tree without files.
func appDir(t testing.TB) string {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("app\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writePlugin writes a plugin.yaml whose generate command is sh -c script.
func writePlugin(t testing.TB, dir, script string) string {
	t.Helper()
	data, _ := json.Marshal(map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "ConfigManagementPlugin",
		"metadata": map[string]string{"name": "test"},
		"spec":     map[string]any{"generate": map[string]any{"command": []string{"sh", "-c", script}}},
	})
	path := filepath.Join(dir, "plugin.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// playground is a Server serving on a loopback port for one test.
type playground struct {
	*Server
	url string
}

func start(t testing.TB, opts Options) *playground {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = zaptest.NewLogger(t)
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = 50 * time.Millisecond
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("the playground did not stop within 15s")
		}
	})
	return &playground{Server: s, url: "http://" + ln.Addr().String()}
}

var httpClient = &http.Client{Timeout: 60 * time.Second}

// post sends body as JSON and decodes the answer into out (if not nil).
func (p *playground) post(t testing.TB, path string, body any, out any) int {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return p.postRaw(t, path, "application/json", data, out)
}

func (p *playground) postRaw(t testing.TB, path, contentType string, data []byte, out any) int {
	t.Helper()
	resp, err := httpClient.Post(p.url+path, contentType, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s answered %d with %.300s: %v", path, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode
}

// Answers as the tests read them.
type runAnswer struct {
	Error      string          `json:"error"`
	Cancelled  bool            `json:"cancelled"`
	DurationMS float64         `json:"durationMs"`
	Commands   []commandResult `json:"commands"`
}

type generateAnswer struct {
	runAnswer
	generateResponse
}

type announceAnswer struct {
	runAnswer
	Announcements []announcement `json:"announcements"`
	Problems      []Problem      `json:"problems"`
}

type discoverAnswer struct {
	runAnswer
	discoverResponse
}
