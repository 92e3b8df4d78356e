package injector

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"go.uber.org/zap"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/test/golden"
)

// The golden directory holds one case per input object, <case>.yaml (a Pod
// or a workload), with optional companions:
//
//   - <case>.catalog.yaml: the catalog to use instead of testdata/catalog.yaml;
//   - <case>.review.yaml: a second admission request the webhook is asked
//     about that pod (an UPDATE, another resource or operation, a pod that
//     does not decode, no catalog loaded): see goldenReview;
//   - <case>.golden.yaml: what is expected, written by -update.
//
// Nothing else may be there: a golden, catalog or review without its input
// is an orphan, and fails.
const goldenDir = "testdata/golden"

const (
	goldenSuffix  = ".golden.yaml"
	catalogSuffix = ".catalog.yaml"
	reviewSuffix  = ".review.yaml"
)

// goldenTrustedUser is the service account the golden servers trust, as the
// chart trusts the injector's own.
const goldenTrustedUser = "system:serviceaccount:cmp-injector:cmp-injector"

// goldenReview is a <case>.review.yaml: how the webhook is asked, besides the
// CREATE of the case's pod that every case makes.
type goldenReview struct {
	// Operation is CREATE unless set; an UPDATE's old object is the pod as
	// its CREATE admitted it (patched when injected).
	Operation admissionv1.Operation `json:"operation"`
	// Resource and SubResource default to pods and none.
	Resource    string `json:"resource"`
	SubResource string `json:"subResource"`
	// User sends the request; goldenTrustedUser is trusted.
	User string `json:"user"`
	// Patch is an RFC 6902 JSON Patch turning the admitted pod into the
	// request's object.
	Patch []any `json:"patch"`
	// Object and OldObject, when set, are sent as the request's object and
	// old object instead (raw JSON, for objects the API server would never
	// send).
	Object    string `json:"object"`
	OldObject string `json:"oldObject"`
	// NoCatalog asks a webhook that has no valid catalog loaded.
	NoCatalog bool `json:"noCatalog"`
}

// goldenDecision is one path's decision as the golden file records it.
type goldenDecision struct {
	Decision inject.Decision `json:"decision"`
	Reasons  []inject.Reason `json:"reasons"`
	Plugins  []string        `json:"plugins,omitempty"`
	Message  string          `json:"message"`
	Warnings []string        `json:"warnings,omitempty"`
	Hints    []string        `json:"hints,omitempty"`
	// Server is where the sidecars take the plugin server from, recorded
	// when the catalog gives serverPath to one of the pod's plugins at least
	// (the copy, which every other case has, goes unrecorded).
	Server *inject.ServerChoice `json:"server,omitempty"`
}

// goldenAnswer is the webhook's answer to a case's review.
type goldenAnswer struct {
	Request  string          `json:"request"`
	Allowed  bool            `json:"allowed"`
	Code     int32           `json:"code,omitempty"`
	Reasons  []inject.Reason `json:"reasons"`
	Message  string          `json:"message,omitempty"`
	Warnings []string        `json:"warnings,omitempty"`
	Patched  bool            `json:"patched,omitempty"`
}

// goldenFile is the first document of <case>.golden.yaml; the second, when
// the pod is admitted, is the object as `cmp-injector inject` writes it.
type goldenFile struct {
	Offline goldenDecision `json:"offline"`
	Review  *goldenAnswer  `json:"review,omitempty"`
}

const goldenHeader = "# Written by go test ./injector/ -run TestGolden -update: the decision of\n" +
	"# `cmp-injector inject` (the webhook's CREATE answer must be the same), the\n" +
	"# webhook's answer to <case>.review.yaml if any, then the object as written.\n"

// TestGolden drives every case through the webhook (HTTPS, AdmissionReview,
// returned JSON Patch applied with evanphx/json-patch, reasons read from its
// metrics) and through inject.IntoResources, the function behind
// `cmp-injector inject`: both must decide the same, the webhook's pod must be
// the offline output's, and the result must be the case's golden file.
func TestGolden(t *testing.T) {
	cases, orphans := goldenCases(t)
	servers := map[string]*testServer{}
	seen := map[inject.Reason]bool{}
	expected := map[string]bool{}
	for _, name := range cases {
		catFile := goldenCatalogFile(name)
		if servers[catFile] == nil {
			servers[catFile] = startServerWith(t, catFile, func(o *Options) { o.TrustedUsers = []string{goldenTrustedUser} })
		}
		ts := servers[catFile]
		goldenPath := filepath.Join(goldenDir, name+goldenSuffix)
		expected[goldenPath] = true
		t.Run(name, func(t *testing.T) {
			cat, err := catalog.Load(catFile)
			if err != nil {
				t.Fatal(err)
			}
			input, err := os.ReadFile(filepath.Join(goldenDir, name+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			objs, err := inject.IntoResources(bytes.NewReader(input), cat, "")
			if err != nil || len(objs) != 1 || objs[0].Report == nil {
				t.Fatalf("IntoResources: %d objects, %v (a case is one object that carries a pod)", len(objs), err)
			}
			offline := objs[0]
			r := offline.Report
			var g goldenFile
			g.Offline = goldenDecision{Decision: r.Decision, Reasons: r.Reasons, Plugins: r.Plugins, Message: r.Message(),
				Warnings: r.Warnings, Hints: offline.Hints}
			if r.Server != nil && len(r.Server.WithoutServerPath) < len(r.Plugins) {
				g.Offline.Server = r.Server
			}
			for _, reason := range r.Reasons {
				seen[reason] = true
			}
			admitted := checkWebhookCreate(t, ts, input, offline)
			if rv := readReview(t, name); rv != nil {
				g.Review = askReview(t, ts, rv, input, admitted)
				for _, reason := range g.Review.Reasons {
					seen[reason] = true
				}
			}
			if r.Decision == inject.Injected {
				checkReportPod(t, offline)
				checkIdempotent(t, cat, offline.Output)
			}
			head, err := yaml.Marshal(&g)
			if err != nil {
				t.Fatal(err)
			}
			out := append([]byte(goldenHeader), head...)
			if r.Decision != inject.Denied {
				out = append(append(out, "---\n"...), offline.Output...)
			}
			golden.Check(t, goldenPath, out)
		})
	}
	for _, f := range orphans {
		if golden.Update() && strings.HasSuffix(f, goldenSuffix) {
			_ = os.Remove(f)
			continue
		}
		t.Errorf("orphaned %s: neither a case (<name>.yaml, no dot in the name) nor the golden, catalog or review of one (remove it; -update removes goldens)", f)
	}
	all, _ := filepath.Glob(filepath.Join(goldenDir, "*"+goldenSuffix))
	for _, f := range all {
		if !expected[f] && !slices.Contains(orphans, f) {
			t.Errorf("%s: not produced by any case", f)
		}
	}
	if !t.Failed() {
		for _, reason := range reasonConstants(t) {
			if !seen[reason] {
				t.Errorf("reason %q has no golden case: add one to %s", reason, goldenDir)
			}
		}
	}
}

// goldenCases are the input cases, sorted, and the files that belong to no case.
func goldenCases(t *testing.T) (cases, orphans []string) {
	t.Helper()
	entries, err := os.ReadDir(goldenDir)
	if err != nil {
		t.Fatal(err)
	}
	inputs := map[string]bool{}
	for _, e := range entries {
		n := e.Name()
		// A case's name has no dot, so that no companion passes for a case.
		if c, ok := strings.CutSuffix(n, ".yaml"); ok && !strings.Contains(c, ".") {
			inputs[strings.TrimSuffix(n, ".yaml")] = true
		}
	}
	for _, e := range entries {
		n := e.Name()
		if c := goldenCaseName(n); !inputs[c] || (c+".yaml" != n && c+goldenSuffix != n && c+catalogSuffix != n && c+reviewSuffix != n) {
			orphans = append(orphans, filepath.Join(goldenDir, n))
		}
	}
	return slices.Sorted(maps.Keys(inputs)), orphans
}

// goldenCatalogFile is the catalog of case name: its own
// <case>.catalog.yaml, else testdata/catalog.yaml.
func goldenCatalogFile(name string) string {
	if _, err := os.Stat(filepath.Join(goldenDir, name+catalogSuffix)); err == nil {
		return filepath.Join(goldenDir, name+catalogSuffix)
	}
	return filepath.Join("testdata", "catalog.yaml")
}

// goldenCaseName is the case a file of the golden directory belongs to.
func goldenCaseName(file string) string {
	base := filepath.Base(file)
	for _, s := range []string{goldenSuffix, catalogSuffix, reviewSuffix} {
		if strings.HasSuffix(base, s) {
			return strings.TrimSuffix(base, s)
		}
	}
	return strings.TrimSuffix(base, ".yaml")
}

// checkWebhookCreate sends the case's pod to the webhook as a CREATE and
// checks that it answers as the offline path decided; it returns the pod as
// admitted (patched when injected) as canonical JSON.
func checkWebhookCreate(t *testing.T, ts *testServer, input []byte, offline *inject.Object) []byte {
	t.Helper()
	r := offline.Report
	podJSON := podOf(t, input)
	ns := namespaceOf(t, input)
	resp, reasons := ts.reviewCounted(t, podReview("uid-1", ns, podJSON, false))
	if resp.UID != "uid-1" {
		t.Errorf("response uid %q", resp.UID)
	}
	if !slices.Equal(reasons, r.Reasons) {
		t.Errorf("webhook reasons %v, offline %v", reasons, r.Reasons)
	}
	if !slices.Equal(resp.Warnings, r.Warnings) {
		t.Errorf("webhook and offline warnings differ:\nwebhook: %q\noffline: %q", resp.Warnings, r.Warnings)
	}
	if r.Decision == inject.Denied {
		if resp.Allowed || resp.Result == nil || resp.Result.Message != r.Message() {
			t.Errorf("webhook answer %+v, offline denied: %s", resp.Result, r.Message())
		}
		if err := inject.Denials([]*inject.Object{offline}); err == nil || !strings.Contains(err.Error(), r.Message()) {
			t.Errorf("Denials() = %v, want it to contain the report message", err)
		}
		return nil
	}
	if !resp.Allowed {
		t.Fatalf("webhook denied: %s", resp.Result.Message)
	}
	patched := applyAnswer(t, resp, podJSON)
	if (resp.Patch != nil) != (r.Decision == inject.Injected) {
		t.Errorf("webhook patch %q for an offline decision %s", resp.Patch, r.Decision)
	}
	if offPod := podOf(t, offline.Output); !bytes.Equal(patched, offPod) {
		t.Errorf("the webhook's pod differs from the offline output's:\nwebhook: %s\noffline: %s", patched, offPod)
	}
	return patched
}

// applyAnswer is pod with the response's patch applied, as canonical JSON.
func applyAnswer(t *testing.T, resp *admissionv1.AdmissionResponse, pod []byte) []byte {
	t.Helper()
	if resp.Patch == nil {
		return pod
	}
	if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("patch type %v", resp.PatchType)
	}
	p, err := jsonpatch.DecodePatch(resp.Patch)
	if err != nil {
		t.Fatal(err)
	}
	patched, err := p.Apply(pod)
	if err != nil {
		t.Fatalf("apply: %v\npatch: %s", err, resp.Patch)
	}
	return canonical(t, patched)
}

func readReview(t *testing.T, name string) *goldenReview {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goldenDir, name+reviewSuffix))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var rv goldenReview
	if err := yaml.UnmarshalStrict(b, &rv); err != nil {
		t.Fatalf("%s%s: %v", name, reviewSuffix, err)
	}
	return &rv
}

// askReview sends the case's review to the webhook (to one without a catalog
// when it asks so) and records the answer.
func askReview(t *testing.T, ts *testServer, rv *goldenReview, input, admitted []byte) *goldenAnswer {
	t.Helper()
	req := &admissionv1.AdmissionRequest{UID: "uid-2", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, SubResource: rv.SubResource,
		Namespace: namespaceOf(t, input), Operation: admissionv1.Create}
	if rv.Resource != "" {
		req.Resource.Resource = rv.Resource
	}
	if rv.Operation != "" {
		req.Operation = rv.Operation
	}
	req.UserInfo.Username = rv.User
	if admitted == nil {
		admitted = podOf(t, input)
	}
	object := admitted
	if rv.Patch != nil {
		raw, err := json.Marshal(rv.Patch)
		if err != nil {
			t.Fatal(err)
		}
		p, err := jsonpatch.DecodePatch(raw)
		if err != nil {
			t.Fatal(err)
		}
		if object, err = p.Apply(admitted); err != nil {
			t.Fatalf("review patch: %v", err)
		}
		if bytes.Equal(canonical(t, object), admitted) {
			t.Fatalf("the review's patch changes nothing")
		}
	}
	if rv.Object != "" {
		object = []byte(rv.Object)
	}
	old := admitted
	if rv.OldObject != "" {
		old = []byte(rv.OldObject)
	}
	switch req.Operation {
	case admissionv1.Update:
		req.Object.Raw, req.OldObject.Raw = object, old
	case admissionv1.Delete:
		req.OldObject.Raw = old
	default:
		req.Object.Raw = object
	}
	dryRun := false
	req.DryRun = &dryRun
	review := admissionv1.AdmissionReview{Request: req}
	review.SetGroupVersionKind(admissionGVK)
	body, err := json.Marshal(&review)
	if err != nil {
		t.Fatal(err)
	}
	if rv.NoCatalog {
		ts = catalogLessServer(t)
	}
	resp, reasons := ts.reviewCounted(t, body)
	if resp.UID != req.UID {
		t.Errorf("response uid %q", resp.UID)
	}
	a := &goldenAnswer{Request: describeRequest(req, rv), Allowed: resp.Allowed, Reasons: reasons, Warnings: resp.Warnings,
		Patched: resp.Patch != nil}
	if resp.Result != nil {
		a.Code, a.Message = resp.Result.Code, resp.Result.Message
	}
	return a
}

func describeRequest(req *admissionv1.AdmissionRequest, rv *goldenReview) string {
	s := string(req.Operation) + " " + req.Resource.Resource
	if req.SubResource != "" {
		s += "/" + req.SubResource
	}
	if rv.User != "" {
		s += " by " + rv.User
	}
	if rv.Object != "" {
		s += " with a raw object"
	}
	if rv.OldObject != "" {
		s += " with a raw old object"
	}
	if rv.NoCatalog {
		s += ", no catalog loaded"
	}
	return s
}

// catalogLessServer is the webhook handler of a server whose catalog never
// loaded, over loopback HTTP (Serve refuses to start without one, so this is
// the only way such a server answers).
func catalogLessServer(t *testing.T) *testServer {
	t.Helper()
	s := New(Options{CatalogFile: filepath.Join(t.TempDir(), "none.yaml")}, zap.NewNop())
	hs := httptest.NewServer(s.WebhookHandler())
	t.Cleanup(hs.Close)
	return &testServer{srv: s, webhookURL: hs.URL, client: hs.Client()}
}

// reviewCounted posts a review and returns the answer and the reasons the
// server counted for it in its metrics (the report behind the answer):
// "injected" for an injection, else the skip or deny reasons, sorted.
func (ts *testServer) reviewCounted(t *testing.T, body []byte) (*admissionv1.AdmissionResponse, []inject.Reason) {
	t.Helper()
	before := reasonCounts(t, ts.srv)
	resp := ts.review(t, body)
	after := reasonCounts(t, ts.srv)
	var reasons []inject.Reason
	for _, k := range slices.Sorted(maps.Keys(after)) {
		if d := after[k] - before[k]; d != 0 {
			if d != 1 {
				t.Errorf("%s counted %v times for one review", k, d)
			}
			reasons = append(reasons, inject.Reason(k))
		}
	}
	return resp, reasons
}

// reasonCounts reads the decision counters of s's registry by reason.
func reasonCounts(t *testing.T, s *Server) map[string]float64 {
	t.Helper()
	families, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		switch f.GetName() {
		case "cmp_injector_injected_total":
			for _, m := range f.GetMetric() {
				out[string(inject.ReasonInjected)] += m.GetCounter().GetValue()
			}
		case "cmp_injector_skipped_total", "cmp_injector_denied_total":
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "reason" {
						out[l.GetValue()] += m.GetCounter().GetValue()
					}
				}
			}
		}
	}
	return out
}

// reasonConstants are the Reason constants pkg/inject declares, read from
// its source so that a new reason without a golden case fails this test.
func reasonConstants(t *testing.T) []inject.Reason {
	t.Helper()
	files, err := filepath.Glob("../pkg/inject/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []inject.Reason
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Reason" {
					continue
				}
				for _, v := range vs.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("%s: a Reason constant that is not a string literal", fset.Position(v.Pos()))
					}
					s, _ := strconv.Unquote(lit.Value)
					out = append(out, inject.Reason(s))
				}
			}
		}
	}
	if len(out) < 10 {
		t.Fatalf("found only %d Reason constants in pkg/inject: %v", len(out), out)
	}
	return out
}

// namespaceOf is the object's namespace.
func namespaceOf(t *testing.T, doc []byte) string {
	t.Helper()
	var obj struct {
		Metadata struct {
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &obj); err != nil {
		t.Fatal(err)
	}
	return obj.Metadata.Namespace
}

// podOf is the pod (template) of a YAML object as canonical JSON.
func podOf(t *testing.T, doc []byte) []byte {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal(doc, &obj); err != nil {
		t.Fatal(err)
	}
	api, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	path, _ := inject.TemplatePath(api, kind)
	podJSON, err := inject.PodJSON(obj, path)
	if err != nil {
		t.Fatal(err)
	}
	return canonical(t, podJSON)
}

// canonical re-encodes JSON with sorted keys.
func canonical(t *testing.T, js []byte) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(js, &v); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(v)
	return out
}

// checkReportPod: the typed pod in the report and the output must agree.
func checkReportPod(t *testing.T, o *inject.Object) {
	t.Helper()
	var patched corev1.Pod
	if err := json.Unmarshal(podOf(t, o.Output), &patched); err != nil {
		t.Fatal(err)
	}
	want := o.Report.Pod.DeepCopy()
	want.TypeMeta = patched.TypeMeta
	if !equality.Semantic.DeepEqual(&patched, want) {
		t.Errorf("Report.Pod and the patched pod differ")
	}
}

// checkIdempotent: injecting the injected output again changes nothing.
func checkIdempotent(t *testing.T, cat *catalog.Catalog, injected []byte) {
	t.Helper()
	again, err := inject.IntoResources(bytes.NewReader(injected), cat, "")
	if err != nil {
		t.Fatal(err)
	}
	r := again[0].Report
	if r.Decision != inject.Skipped || r.Reasons[0] != inject.ReasonAlreadyInjected {
		t.Errorf("second pass: %s %v", r.Decision, r.Reasons)
	}
	if !bytes.Equal(again[0].Output, injected) {
		t.Errorf("second pass changed the output")
	}
}
