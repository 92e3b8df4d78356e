package injector

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
)

// Secrets stay secret (issue 25, item 4, the webhook's side): the catalog
// names Secrets and never holds their data, and the injector never reads a
// Secret for a plugin, so a Secret's value cannot reach a response, a log
// line, explain or doctor. What can carry a value is a literal typed into a
// pod or into the catalog's env by mistake; such a value must not travel
// further than the pod spec it is part of.

// planted is a value that must appear in no output but the pod spec.
const planted = "planted-s3cr3t-9b1e7c"

const secretsCatalog = `apiVersion: cmp-injector.io/v1alpha1
kind: PluginCatalog
revision: secrets-1
defaults: {copyImage: ghcr.io/cmp-injector/cmp-server:v0.1.0}
plugins:
  vault:
    image: example.com/helmfile-cmp:1
    config: {fromImage: true}
    envFrom: [{secretRef: {name: avp-credentials}}]
    env:
      - {name: VAULT_TOKEN, valueFrom: {secretKeyRef: {name: vault-token, key: token}}}
      - {name: MISTAKE, value: ` + planted + `}
    volumes:
      - {name: age, mountPath: /keys, secret: {secretName: sops-age}}
      - {name: jwt, mountPath: /var/run/secrets/vault, projected: {sources: [{serviceAccountToken: {audience: vault, path: token}}]}}
namespaces:
  argocd: [vault]
`

// secretsPod is a repo-server asking for plugins, carrying the planted value
// where a pod author might: a literal env value and an annotation.
func secretsPod(plugins string, extraVolume string) []byte {
	return []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"repo","namespace":"argocd",
"labels":{"cmp-injector.io/inject":"true"},
"annotations":{"cmp-injector.io/plugins":"` + plugins + `","example.com/password":"` + planted + `"}},
"spec":{"containers":[{"name":"argocd-repo-server","image":"quay.io/argoproj/argocd:v3.1.0",
"env":[{"name":"REDIS_PASSWORD","value":"` + planted + `"}]}]` + extraVolume + `}}`)
}

func TestSecretValuesStayOutOfAnswersAndLogs(t *testing.T) {
	catFile := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(catFile, []byte(secretsCatalog), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&logs), zapcore.DebugLevel)
	s := New(Options{CatalogFile: catFile}, zap.New(core))
	if _, err := s.catalog.Reload(); err != nil {
		t.Fatal(err)
	}
	h := s.WebhookHandler()
	review := func(pod []byte) []byte {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/mutate", bytes.NewReader(podReview("uid-1", "argocd", pod, false)))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		return rec.Body.Bytes()
	}
	injected := review(secretsPod("vault", ""))
	denied := review(secretsPod("vault, nope", `,"volumes":[{"name":"cmp-vault-v-age","emptyDir":{}}]`))
	if !bytes.Contains(denied, []byte(`"allowed":false`)) || !bytes.Contains(injected, []byte(`"patch"`)) {
		t.Fatalf("want one injection and one denial:\n%s\n%s", injected, denied)
	}
	// The patch carries the references: the kubelet resolves them, not us.
	patch := patchOf(t, injected)
	for _, ref := range []string{"avp-credentials", "vault-token", "sops-age", `"audience":"vault"`} {
		if !strings.Contains(patch, ref) {
			t.Errorf("the patch lacks the reference %s", ref)
		}
	}
	// The catalog's literal value is the sidecar's spec, so the patch has
	// it (docs/catalog.md: use valueFrom or envFrom for secrets); the pod's
	// own literal values are never copied.
	if strings.Count(patch, planted) != 1 {
		t.Errorf("the patch carries the planted value %d times, want once (the catalog's env)", strings.Count(patch, planted))
	}
	for what, out := range map[string]string{
		"the injecting answer without its patch": strings.Replace(string(injected), patchField(t, injected), "", 1),
		"the denial":                             string(denied),
		"the logs":                               logs.String(),
	} {
		if strings.Contains(out, planted) {
			t.Errorf("%s carries the planted value:\n%s", what, out)
		}
	}
	if !strings.Contains(logs.String(), `"injected"`) || !strings.Contains(logs.String(), "cmp-vault-v-age") {
		t.Errorf("the logs lack the review lines:\n%s", logs.String())
	}

	// explain prints a report's message, problems, hints, warnings and
	// status; doctor and the reconciler print drift messages, which name
	// variables but never their values.
	cat, err := catalog.Parse([]byte(secretsCatalog))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := inject.IntoResources(bytes.NewReader(secretsPod("vault, nope", "")), cat, "")
	if err != nil || len(objs) != 1 {
		t.Fatal(err)
	}
	r := objs[0].Report
	var texts []string
	texts = append(texts, r.Message())
	texts = append(texts, r.Warnings...)
	texts = append(texts, objs[0].Hints...)
	objs, err = inject.IntoResources(bytes.NewReader(secretsPod("vault", "")), cat, "")
	if err != nil || len(objs) != 1 || objs[0].Report.Decision != inject.Injected {
		t.Fatalf("offline: %v", err)
	}
	texts = append(texts, objs[0].Report.Message(), objs[0].Report.Status.JSON())
	changed, err := catalog.Parse([]byte(strings.Replace(secretsCatalog, planted, "other-"+planted, 1)))
	if err != nil {
		t.Fatal(err)
	}
	d, err := inject.CheckDrift(objs[0].Report.Pod, changed)
	if err != nil || len(d.Stale) == 0 {
		t.Fatalf("drift %v, %v: the changed env must make the pod stale", d, err)
	}
	texts = append(texts, d.StaleMessage())
	for _, text := range texts {
		if strings.Contains(text, planted) {
			t.Errorf("explain or doctor text carries the planted value: %s", text)
		}
	}
}

// patchOf is the decoded JSON Patch of a review response.
func patchOf(t *testing.T, resp []byte) string {
	t.Helper()
	var r struct {
		Response struct {
			Patch []byte `json:"patch"`
		} `json:"response"`
	}
	if err := json.Unmarshal(resp, &r); err != nil {
		t.Fatal(err)
	}
	return string(r.Response.Patch)
}

// patchField is the base64 patch as it appears in the response body.
func patchField(t *testing.T, resp []byte) string {
	t.Helper()
	_, after, ok := strings.Cut(string(resp), `"patch":"`)
	if !ok {
		t.Fatal("no patch")
	}
	v, _, _ := strings.Cut(after, `"`)
	return v
}

// The injector reads no Secret to inject: the only Secret any injector
// package reads is doctor's check of the webhook's serving certificate.
func TestInjectorReadsNoPluginSecret(t *testing.T) {
	allowed := map[string]bool{filepath.Join("doctor", "webhook.go"): true}
	var found []string
	for _, root := range []string{".", filepath.Join("..", "pkg")} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), p, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Secrets" && !allowed[p] {
					found = append(found, p)
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(found) > 0 {
		t.Errorf("Secrets are read in %v; the injector must only pass references on (docs/catalog.md, Secrets)", found)
	}
}
