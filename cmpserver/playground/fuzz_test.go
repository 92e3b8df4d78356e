package playground

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzRequestBody: whatever a page, an editor or a script sends, the API
// answers 200 or a 4xx with a JSON error, never a 5xx or a panic. The
// environ endpoint runs no plugin, so the fuzzer exercises the decoding and
// the env assembly at full speed.
func FuzzRequestBody(f *testing.F) {
	for _, seed := range []string{
		`{}`,
		`{"parameters":[{"name":"helm-parameters","map":{"image.tag":"v2"}},{"name":"values-files","array":["a.yaml"]},{"name":"x","string":"y"}]}`,
		`{"parameters":null,"env":{"appName":"a","namespace":"n","kubeAPIVersions":["v1"," ",""],"pluginEnv":[{"name":"FOO","value":"$ARGOCD_APP_NAME-$$-${KUBE_VERSION}"}]},"session":"s"}`,
		`{"parameters":[{"name":""}]}`,
		`{"parameters":{"name":"x"}}`,
		`{"parameters":"[]"}`,
		`{"env":{"pluginEnv":[{"name":"A=B"}]}}`,
		`{"env":{"revision":"abc"}}`,
		`{"parameters":[{"name":"héllo wörld","map":{"ǅ":"ß"}}]}`,
		`[`, `null`, `{} {}`, `{"paramters":[]}`, "\xff",
	} {
		f.Add([]byte(seed))
	}
	dir := f.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("app\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	cfg := filepath.Join(dir, "plugin.yaml")
	if err := os.WriteFile(cfg, []byte("kind: ConfigManagementPlugin\nmetadata: {name: f}\nspec: {generate: {command: [\"true\"]}}\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	s, err := New(Options{ConfigPath: cfg, AppDir: dir})
	if err != nil {
		f.Fatal(err)
	}
	h := s.Handler("127.0.0.1:7777")
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:7777/api/environ", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%d answer is not JSON: %q", rec.Code, rec.Body.String())
		}
		switch {
		case rec.Code == http.StatusOK:
			if _, ok := out["appParameters"].(string); !ok {
				t.Fatalf("200 without appParameters: %v", out)
			}
		case rec.Code == http.StatusBadRequest:
			if msg, _ := out["error"].(string); msg == "" {
				t.Fatalf("400 without an error: %v", out)
			}
		default:
			t.Fatalf("status %d for %q: %v", rec.Code, body, out)
		}
	})
}
