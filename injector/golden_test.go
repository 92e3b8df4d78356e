package injector

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/golden")

const goldenDir = "testdata/golden"

// TestGolden drives every case through the webhook (HTTPS, AdmissionReview,
// returned JSON Patch applied with evanphx/json-patch) and through
// inject.IntoResources, the function behind `cmp-injector inject`. The
// offline output must equal the golden, and the webhook's pod the golden's.
func TestGolden(t *testing.T) {
	cases, err := filepath.Glob(filepath.Join(goldenDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	servers := map[string]*testServer{}
	expected := map[string]bool{}
	for _, in := range cases {
		if strings.HasSuffix(in, ".injected.yaml") || strings.HasSuffix(in, ".catalog.yaml") {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(in), ".yaml")
		catFile := filepath.Join("testdata", "catalog.yaml")
		if _, err := os.Stat(filepath.Join(goldenDir, name+".catalog.yaml")); err == nil {
			catFile = filepath.Join(goldenDir, name+".catalog.yaml")
		}
		if servers[catFile] == nil {
			servers[catFile] = startServer(t, catFile)
		}
		ts := servers[catFile]
		t.Run(name, func(t *testing.T) {
			cat, err := catalog.Load(catFile)
			if err != nil {
				t.Fatal(err)
			}
			input, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := inject.IntoResources(bytes.NewReader(input), cat, "")
			if err != nil || len(objs) != 1 {
				t.Fatalf("IntoResources: %d objects, %v", len(objs), err)
			}
			offline := objs[0]
			webOut, webMsg, webWarnings := viaWebhook(t, ts, input)
			if !slices.Equal(webWarnings, offline.Report.Warnings) {
				t.Errorf("webhook and offline warnings differ:\nwebhook: %q\noffline: %q", webWarnings, offline.Report.Warnings)
			}

			if offline.Report.Decision == inject.Denied {
				golden := filepath.Join(goldenDir, name+".denied.txt")
				expected[golden] = true
				offMsg := offline.Report.Message()
				if webMsg != offMsg {
					t.Errorf("webhook and offline messages differ:\nwebhook: %s\noffline: %s", webMsg, offMsg)
				}
				if err := inject.Denials(objs); err == nil || !strings.Contains(err.Error(), offMsg) {
					t.Errorf("Denials() = %v, want it to contain the report message", err)
				}
				checkGolden(t, golden, []byte(offMsg+"\n"))
				return
			}
			if webMsg != "" {
				t.Fatalf("webhook denied: %s", webMsg)
			}
			golden := filepath.Join(goldenDir, name+".injected.yaml")
			expected[golden] = true
			checkGolden(t, golden, offline.Output)
			if offPod := podOf(t, offline.Output); !bytes.Equal(webOut, offPod) {
				t.Errorf("the webhook's pod differs from the offline output's:\nwebhook: %s\noffline: %s", webOut, offPod)
			}
			if offline.Report.Decision == inject.Injected {
				checkReportPod(t, offline)
				checkIdempotent(t, cat, offline.Output)
			}
		})
	}
	// A golden without an input case is stale.
	all, _ := filepath.Glob(filepath.Join(goldenDir, "*"))
	for _, f := range all {
		if (strings.HasSuffix(f, ".injected.yaml") || strings.HasSuffix(f, ".denied.txt")) && !expected[f] {
			if *update {
				_ = os.Remove(f)
				continue
			}
			t.Errorf("stale golden %s: no case produces it (run go test ./injector/ -update)", f)
		}
	}
}

// viaWebhook posts the case's pod to the server and returns the pod it makes
// of it (the returned patch applied with evanphx/json-patch) as canonical
// JSON, or the denial message, and the response's warnings.
func viaWebhook(t *testing.T, ts *testServer, input []byte) (pod []byte, denial string, warnings []string) {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal(input, &obj); err != nil {
		t.Fatal(err)
	}
	podJSON := podOf(t, input)
	ns := obj["metadata"].(map[string]any)["namespace"].(string)
	resp := ts.review(t, podReview("uid-1", ns, podJSON, false))
	if resp.UID != "uid-1" {
		t.Errorf("response uid %q", resp.UID)
	}
	if !resp.Allowed {
		return nil, resp.Result.Message, resp.Warnings
	}
	if resp.Patch == nil {
		return podJSON, "", resp.Warnings
	}
	if *resp.PatchType != "JSONPatch" {
		t.Fatalf("patch type %s", *resp.PatchType)
	}
	p, err := jsonpatch.DecodePatch(resp.Patch)
	if err != nil {
		t.Fatal(err)
	}
	patched, err := p.Apply(podJSON)
	if err != nil {
		t.Fatalf("apply: %v\npatch: %s", err, resp.Patch)
	}
	return canonical(t, patched), "", resp.Warnings
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

func checkGolden(t *testing.T, file string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test ./injector/ -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale (run go test ./injector/ -update); got:\n%s", file, got)
	}
}
