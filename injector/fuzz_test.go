package injector

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
)

// FuzzDecodeReview: any body gets either a decoded request with a uid, or a
// 4xx request error; the decision never panics on what decodes, and a denial
// carries a message and an error status.
func FuzzDecodeReview(f *testing.F) {
	f.Add([]byte(podReview("u", "argocd", []byte(testPod), false)))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x"}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","operation":"CREATE","resource":{"version":"v1","resource":"pods"},"object":{"metadata":{"labels":{"cmp-injector.io/inject":"true"}}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","operation":"UPDATE","resource":{"version":"v1","resource":"pods"},"object":{"spec":3},"oldObject":[]}}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`null`))
	cat, err := catalog.Load("testdata/catalog.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeReview("application/json", body)
		if err != nil {
			re, ok := asRequestError(err)
			if !ok || re.code < 400 || re.code >= 500 || re.msg == "" {
				t.Fatalf("error %v is not a 4xx request error", err)
			}
			return
		}
		if req.UID == "" {
			t.Fatal("accepted a review without a uid")
		}
		report := req.decide(cat, nil, nil)
		resp := respond(req.UID, report)
		if resp.UID != req.UID {
			t.Fatal("response lost the uid")
		}
		if !resp.Allowed && (resp.Result == nil || resp.Result.Message == "" || resp.Result.Code == http.StatusOK) {
			t.Fatalf("denial without a message: %+v", resp.Result)
		}
	})
}

// reviewSeeds are reviews of every operation and shape the decoder meets.
func reviewSeeds(f *testing.F) {
	f.Add([]byte(podReview("u", "argocd", []byte(testPod), false)))
	f.Add([]byte(podReview("u", "", bigPod(3), true)))
	f.Add([]byte(podReview("u", "argocd", []byte(`{"metadata":{"labels":{"cmp-injector.io/inject":"true"},"annotations":{"cmp-injector.io/plugins":"helm","cmp-injector.io/status":"{}"}}}`), false)))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","operation":"CREATE","resource":{"version":"v1","resource":"services"},"object":{}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","operation":"CREATE","resource":{"version":"v1","resource":"pods"},"object":null}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","operation":"DELETE","resource":{"version":"v1","resource":"pods"},"oldObject":{}}}`))
	// encoding/json's semantics the one-pass decoder keeps: names matched
	// without case, the last of duplicate names, invalid UTF-8 replaced.
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","Request":{"UID":"x","Operation":"CREATE","resource":{"version":"v1","resource":"pods"},"Object":{"Metadata":{"LABELS":{"cmp-injector.io/inject":"true"},"annotations":{"cmp-injector.io/plugins":"helm"}}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","operation":"CREATE","resource":{"version":"v1","resource":"pods"},"object":{"metadata":{"labels":{"cmp-injector.io/inject":"false"},"labels":{"cmp-injector.io/inject":"true"},"annotations":{"cmp-injector.io/plugins":"helm` + "\xff" + `"}}}}}`))
	// UPDATEs: an injected pod edited, resized and debugged.
	injected := `{"metadata":{"labels":{"cmp-injector.io/inject":"true"},"annotations":{"cmp-injector.io/plugins":"helm","cmp-injector.io/status":"{\"plugins\":[\"helm\"],\"containers\":[],\"initContainers\":[\"cmp-helm\"],\"volumes\":[],\"revision\":\"x\"}"}},` +
		`"spec":{"initContainers":[{"name":"cmp-helm","image":"alpine/helm:3.16.2","resources":{"limits":{"memory":"512Mi"}}}],"containers":[{"name":"argocd-repo-server","image":"x"}]}}`
	for _, edit := range [][2]string{
		{`"alpine/helm:3.16.2"`, `"evil:1"`},
		{`"512Mi"`, `"1Mi"`},
		{`"512Mi"`, `"0.5Gi"`},
		{`"containers":[{`, `"ephemeralContainers":[{"name":"dbg","targetContainerName":"cmp-helm","volumeMounts":[{"name":"plugins","mountPath":"/p"}]}],"containers":[{`},
		{`"cmp-injector.io/inject":"true"`, `"team":"a"`},
	} {
		newPod := string(bytes.Replace([]byte(injected), []byte(edit[0]), []byte(edit[1]), 1))
		for _, sub := range []string{"", "resize", "ephemeralcontainers"} {
			f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","operation":"UPDATE","subResource":"` + sub +
				`","resource":{"version":"v1","resource":"pods"},"userInfo":{"username":"u"},"object":` + newPod + `,"oldObject":` + injected + `}}`))
		}
	}
}

// FuzzSlimReviewMatchesWhole: whenever encoding/json decodes a review whole
// (the envelope into admissionv1.AdmissionReview, its pods into corev1.Pod),
// the webhook's one-pass slim decode answers it byte for byte as the same
// decisions do on the whole pods. (The slim decode skips fields the
// decisions do not read, so it does not refuse a malformed field there; the
// API server never sends one.)
func FuzzSlimReviewMatchesWhole(f *testing.F) {
	reviewSeeds(f)
	cat, err := catalog.Load("testdata/catalog.yaml")
	if err != nil {
		f.Fatal(err)
	}
	trusted := func(u string) bool { return u == "trusted" }
	f.Fuzz(func(t *testing.T, body []byte) {
		var whole admissionv1.AdmissionReview
		if json.Unmarshal(body, &whole) != nil || whole.GroupVersionKind() != admissionGVK || whole.Request == nil || whole.Request.UID == "" {
			return
		}
		want, ok := wholeDecision(whole.Request, cat, trusted)
		if !ok {
			return // a pod that does not decode whole: the texts of the two decoders' errors differ
		}
		req, err := decodeReview("application/json", body)
		if err != nil {
			t.Fatalf("the whole decode accepts the review, the slim one refuses it: %v", err)
		}
		var wb, gb bytes.Buffer
		_ = encodeResponse(&wb, respond(whole.Request.UID, want))
		_ = encodeResponse(&gb, respond(req.UID, req.decide(cat, inject.NewEncodings(), trusted)))
		if !bytes.Equal(wb.Bytes(), gb.Bytes()) {
			t.Fatalf("one-pass answer differs:\n got %s\nwant %s", gb.String(), wb.String())
		}
	})
}

// wholeDecision is the decision on req's pods decoded whole with
// encoding/json, routed as the webhook routes; false when a pod the decision
// reads does not decode.
func wholeDecision(req *admissionv1.AdmissionRequest, cat *catalog.Catalog, trusted func(string) bool) (*inject.Report, bool) {
	route := slimRequest{Resource: req.Resource, SubResource: req.SubResource, Operation: req.Operation}
	if reason, ok := route.reviewed(); !ok {
		return inject.Unreviewed(reason), true
	}
	whole := func(raw []byte) (*corev1.Pod, error, bool) {
		if len(raw) == 0 {
			return nil, inject.ErrNoObject, true
		}
		var p corev1.Pod
		if json.Unmarshal(raw, &p) != nil {
			return nil, nil, false
		}
		return &p, nil, true
	}
	a := inject.Admission{Operation: req.Operation, Namespace: req.Namespace}
	var ok bool
	if a.Pod, a.PodErr, ok = whole(req.Object.Raw); !ok {
		return nil, false
	}
	if req.Operation == admissionv1.Update && a.PodErr == nil {
		if a.OldPod, a.OldPodErr, ok = whole(req.OldObject.Raw); !ok {
			return nil, false
		}
		a.Trusted = trusted(req.UserInfo.Username)
	}
	return inject.Admit(&a, cat, nil), true
}

// fuzzEncodings is shared by the fuzz inputs, so that the webhook's path
// answers from cached JSON as it does in a server, against the offline
// path's freshly marshalled.
var fuzzEncodings = inject.NewEncodings()

// FuzzSlimPodMatchesWhole: for any pod JSON that decodes into corev1.Pod,
// the webhook's slim decode through inject.Admit (patch only) gives the same
// decision, reasons, messages, status and patch bytes as the whole pod
// through inject.Inject, the offline path. Seeds: the golden pods and pods
// exercising every field the slim decode keeps.
func FuzzSlimPodMatchesWhole(f *testing.F) {
	for _, p := range []string{
		testPod,
		string(bigPod(2)),
		`{"metadata":{"labels":{"cmp-injector.io/inject":"true"},"annotations":{"cmp-injector.io/plugins":"helm","image.cmp-injector.io/helm":"alpine/helm:3.17"}},` +
			`"spec":{"securityContext":{"runAsUser":1234},"volumes":[{"name":"var-files"},{"name":"other","configMap":{"name":"argocd-cmp-cm","items":[{"key":"helm.yaml","path":"plugin.yaml"}]}}],` +
			`"initContainers":[{"name":"copyutil","image":"argocd"}],"containers":[{"name":"argocd-repo-server","image":"x","env":[{"name":"ARGOCD_CMP_CHUNK_SIZE","value":"1"},{"name":"X","valueFrom":{}}],` +
			`"volumeMounts":[{"name":"a","mountPath":"/a"}],"securityContext":{"runAsUser":1234},"resources":{"limits":{}}},{"name":"my-plugin","image":"y","volumeMounts":[{"name":"other","mountPath":"/home/argocd/cmp-server/config"}]}]}}`,
		`{"metadata":{"labels":{"cmp-injector.io/inject":"true"},"annotations":{"cmp-injector.io/plugins":"helm"}},"spec":{"containers":[{"name":"argocd-repo-server","envFrom":[{}],` +
			`"volumeMounts":[{"name":"plugins","mountPath":"/home/argocd/cmp-server/plugins/"}]},{"name":"cmp-helm"}]}}`,
		`{"metadata":{"labels":{"cmp-injector.io/inject":"true"},"annotations":{"cmp-injector.io/plugins":"helm","cmp-injector.io/status":"{\"plugins\":[\"helm\"],\"containers\":[],\"initContainers\":[\"cmp-helm\"],\"volumes\":[],\"revision\":\"x\"}"}},` +
			`"spec":{"initContainers":[{"name":"cmp-helm","image":"evil"}],"containers":[{"name":"argocd-repo-server"}]}}`,
	} {
		f.Add([]byte(p))
	}
	inputs, _ := filepath.Glob(filepath.Join(goldenDir, "*.yaml"))
	for _, in := range inputs {
		y, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		var obj map[string]any
		if yaml.Unmarshal(y, &obj) == nil && obj["kind"] == "Pod" {
			j, _ := json.Marshal(obj)
			f.Add(j)
		}
	}
	cat, err := catalog.Load("testdata/catalog.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var whole corev1.Pod
		if json.Unmarshal(raw, &whole) != nil {
			return
		}
		var slim slimPod
		if err := jsonv2.Unmarshal(raw, &slim, v1Semantics); err != nil {
			t.Fatalf("the whole pod decodes but the slim one does not: %v", err)
		}
		want := inject.Inject(&whole, "argocd", cat)
		pod, err := slim.pod(raw, false)
		if err != nil {
			t.Fatal(err)
		}
		got := inject.Admit(&inject.Admission{Operation: admissionv1.Create, Namespace: "argocd", Pod: pod}, cat, fuzzEncodings)
		if got.Decision != want.Decision || !reflect.DeepEqual(got.Reasons, want.Reasons) ||
			!reflect.DeepEqual(got.Problems, want.Problems) || !reflect.DeepEqual(got.Plugins, want.Plugins) ||
			!reflect.DeepEqual(got.Warnings, want.Warnings) {
			t.Fatalf("decision differs:\nslim  %v %v %v %q\nwhole %v %v %v %q", got.Decision, got.Reasons, got.Problems, got.Warnings,
				want.Decision, want.Reasons, want.Problems, want.Warnings)
		}
		if !bytes.Equal(got.Patch, want.Patch) || !reflect.DeepEqual(got.Status, want.Status) {
			t.Fatalf("patch differs:\nslim  %s\nwhole %s", got.Patch, want.Patch)
		}
	})
}

// TestEncodeResponseIsJSONMarshal: the directly written allowed response is
// json.Marshal's, byte for byte, and anything else still takes json.Marshal.
func TestEncodeResponseIsJSONMarshal(t *testing.T) {
	jp := admissionv1.PatchTypeJSONPatch
	other := admissionv1.PatchType("Other")
	for _, resp := range []*admissionv1.AdmissionResponse{
		{UID: "0d5bd1a6-7f0e-4c4e-9d3b-2b7cbf4c1e11", Allowed: true},
		{UID: "u", Allowed: true, PatchType: &jp, Patch: []byte(`[{"op":"add","path":"/a","value":1}]`)},
		{UID: "u", Allowed: true, PatchType: &jp},
		{UID: "u", Allowed: true, Patch: []byte{0, 1, 2, 250, 251}},
		{UID: "u", Allowed: true, PatchType: &other, Patch: []byte(`[]`)},
		{UID: `a"b<c>&\` + "\u00e9\x01", Allowed: true, PatchType: &jp, Patch: []byte(`[]`)},
		{UID: "u", Allowed: true, Warnings: []string{"w"}},
		{UID: "u", Allowed: true, AuditAnnotations: map[string]string{"a": "b"}},
		{UID: "u", Allowed: false, Result: &metav1.Status{Code: 403, Message: "no"}},
		{UID: "", Allowed: true},
	} {
		var buf bytes.Buffer
		buf.WriteString("reused buffer")
		buf.Reset()
		if err := encodeResponse(&buf, resp); err != nil {
			t.Fatal(err)
		}
		got := buf.Bytes()
		review := admissionv1.AdmissionReview{Response: resp}
		review.SetGroupVersionKind(admissionGVK)
		want, _ := json.Marshal(&review)
		if !bytes.Equal(got, want) {
			t.Errorf("encodeResponse(%+v)\n got %s\nwant %s", resp, got, want)
		}
	}
}
