package params

import (
	"reflect"
	"strings"
	"testing"
)

func strp(s string) *string { return &s }

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"values-files": "VALUES_FILES",
		"image.tag":    "IMAGE_TAG",
		"a_b9":         "A_B9",
		"héllo wörld":  "H_LLO_W_RLD",
		"":             "",
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}

// The proposal's worked example: values, values-files and helm-parameters.
func TestEnvironWorkedExample(t *testing.T) {
	ps := []AppParameter{
		{Name: "values", String: strp("resources:\n  cpu: 100m\n  memory: 128Mi")},
		{Name: "values-files", Array: []string{"values.yaml"}},
		{Name: "helm-parameters", Map: map[string]string{
			"image.repository": "my.example.com/gcr-proxy/heptio-images/ks-guestbook-demo",
			"image.tag":        "0.1",
		}},
	}
	want := []string{
		"PARAM_VALUES=resources:\n  cpu: 100m\n  memory: 128Mi",
		"PARAM_VALUES_FILES_0=values.yaml",
		"PARAM_HELM_PARAMETERS_IMAGE_REPOSITORY=my.example.com/gcr-proxy/heptio-images/ks-guestbook-demo",
		"PARAM_HELM_PARAMETERS_IMAGE_TAG=0.1",
	}
	if got := Environ(ps); !reflect.DeepEqual(got, want) {
		t.Errorf("Environ = %q\nwant %q", got, want)
	}
	enc, err := Encode(ps)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON := `[{"name":"values","string":"resources:\n  cpu: 100m\n  memory: 128Mi"},{"array":["values.yaml"],"name":"values-files"},{"map":{"image.repository":"my.example.com/gcr-proxy/heptio-images/ks-guestbook-demo","image.tag":"0.1"},"name":"helm-parameters"}]`
	if enc != wantJSON {
		t.Errorf("Encode = %s\nwant %s", enc, wantJSON)
	}
	back, err := Decode([]byte(enc))
	if err != nil || !reflect.DeepEqual(back, ps) {
		t.Errorf("Decode round trip = %+v, %v", back, err)
	}
}

func TestEnvironCollisionsAreDeterministic(t *testing.T) {
	ps := []AppParameter{
		{Name: "helm-parameters", Map: map[string]string{"image.tag": "v1", "image-tag": "v2", "image_tag": "v3"}},
		{Name: "a", Array: []string{"from-array"}},
		{Name: "A_0", String: strp("from-string")},
		{Name: "both", String: strp("s"), Array: []string{"x"}, Map: map[string]string{}},
	}
	want := []string{
		"PARAM_HELM_PARAMETERS_IMAGE_TAG=v3", // image_tag > image.tag > image-tag
		"PARAM_A_0=from-string",              // later parameter wins
		"PARAM_BOTH=s",
		"PARAM_BOTH_0=x",
	}
	for i := 0; i < 20; i++ {
		if got := Environ(ps); !reflect.DeepEqual(got, want) {
			t.Fatalf("Environ = %q, want %q", got, want)
		}
	}
	enc, _ := Encode(ps[3:])
	if enc != `[{"array":["x"],"map":{},"name":"both","string":"s"}]` {
		t.Errorf("empty map not kept: %s", enc)
	}
	if enc, _ := Encode(nil); enc != "null" {
		t.Errorf("Encode(nil) = %s", enc)
	}
}

func TestDecodeErrors(t *testing.T) {
	// Each message says what the parameters must look like and what was
	// found, in YAML and JSON terms, never with a Go type name.
	for in, want := range map[string]string{
		`{"name":"x"}`:             "found a mapping (JSON object) at the top level",
		`[{"string":"no name"}]`:   "parameter 0: name is required",
		`[1]`:                      "found a number at the top level",
		`[{"name":"a","array":3}]`: "found a number in array",
		`garbage`:                  "not valid JSON",
	} {
		_, err := Decode([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "Go value") || strings.Contains(err.Error(), "params.") {
			t.Errorf("Decode(%s) = %v, want %q", in, err, want)
		}
		if err != nil && !strings.Contains(want, "name is required") && !strings.Contains(err.Error(), `e.g. in YAML "- name: replicas`) {
			t.Errorf("Decode(%s): %v does not show the shape", in, err)
		}
	}
	if ps, err := Decode([]byte(" null ")); err != nil || ps != nil {
		t.Errorf("Decode(null) = %v, %v", ps, err)
	}
}

func TestMergeEnv(t *testing.T) {
	got := MergeEnv([]string{"A=1", "B=2", "junk", "=x"}, []string{"B=3=4", "C="})
	want := []string{"A=1", "B=3=4", "C="}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("MergeEnv = %q", got)
	}
}

func TestParseAnnouncements(t *testing.T) {
	as, err := ParseAnnouncements([]byte(`[{"name":"helm-parameters","Title":"Helm Parameters","collectionType":"map","map":{"image.repo":"q"},"array":["dropped"],"string":"dropped"},{"name":"p","array":["dropped"]}]` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Announcement{
		{Name: "helm-parameters", Title: "Helm Parameters", CollectionType: "map", Map: map[string]string{"image.repo": "q"}},
		{Name: "p"},
	}
	if !reflect.DeepEqual(as, want) {
		t.Errorf("got %+v", as)
	}
	for in, wantErr := range map[string]string{
		``:                                       "printed nothing",
		`{"name":"x"}`:                           `it printed "{\"name\":\"x\"}"`,
		`[{"title":"T"}]`:                        `announcement 0: name is required (entry titled "T")`,
		`[{"name":"x","collectionType":"list"}]`: `unknown collectionType "list"`,
		`[1,`:                                    "not a JSON array",
		strings.Repeat("x", 1000):                "(1000 bytes in total)",
	} {
		_, err := ParseAnnouncements([]byte(in))
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ParseAnnouncements(%.20q) = %v, want %q", in, err, wantErr)
		}
	}
	merged := Merge(want[:1], []Announcement{{Name: "values-files", CollectionType: "array", String: "x"}})
	if len(merged) != 2 || merged[1].String != "" || merged[0].Name != "helm-parameters" {
		t.Errorf("Merge = %+v", merged)
	}
}

// TestParseAnnouncementsNull: Argo CD decodes the output with encoding/json into a
// slice, so a command printing null announces nothing and the call succeeds.
func TestParseAnnouncementsNull(t *testing.T) {
	for _, in := range []string{"null", "null\n", " null \n"} {
		as, err := ParseAnnouncements([]byte(in))
		if err != nil || len(as) != 0 {
			t.Errorf("ParseAnnouncements(%q) = %+v, %v; want no announcements and no error", in, as, err)
		}
	}
	if got := Merge(nil, []Announcement{{Name: "s"}}); len(got) != 1 || got[0].Name != "s" {
		t.Errorf("Merge(nil, static) = %+v", got)
	}
}

func FuzzEscape(f *testing.F) {
	for _, s := range []string{"values-files", "image.tag", "héllo", "ǅ", "ß", "ﬀ", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := Escape(s)
		for _, r := range e {
			if !((r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') || r == '_') {
				t.Fatalf("Escape(%q) = %q has %q", s, e, r)
			}
		}
		if Escape(e) != e {
			t.Fatalf("Escape not idempotent on %q", s)
		}
		env := Environ([]AppParameter{{Name: s, String: &s, Map: map[string]string{s: s}, Array: []string{s}}})
		for _, kv := range env {
			if !strings.HasPrefix(kv, EnvPrefix) || !strings.Contains(kv, "=") {
				t.Fatalf("bad pair %q", kv)
			}
		}
	})
}
