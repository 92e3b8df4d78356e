package playground

import (
	"strings"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/params"
)

func TestLint(t *testing.T) {
	as := []params.Announcement{
		{Name: "values-files", CollectionType: "array", String: ""},                                              // 0 dynamic
		{Name: "replicas", ItemType: "number", String: "three"},                                                  // 1 dynamic
		{Name: "flags", ItemType: "boolean", CollectionType: "map", Map: map[string]string{"a": "yes", "b": ""}}, // 2 dynamic
		{Name: "image.tag"},                                // 3 static
		{Name: "image-tag"},                                // 4 static
		{Name: "values-files"},                             // 5 static: a duplicate
		{Name: "size", ItemType: "bytes"},                  // 6 static
		{Name: "token", Required: true},                    // 7 static
		{Name: "port", ItemType: "number", String: "8080"}, // 8 static
	}
	got := lint(as, 3)
	want := []struct {
		index    int
		severity string
		message  string
	}{
		{1, "warning", `default "three" is not a number`},
		{2, "warning", `default "a": "yes" is not true or false`},
		{5, "warning", "announced again (first as entry 0, dynamic): Argo CD's UI shows only the first entry of a name, so this static entry is ignored"},
		{6, "info", `itemType "bytes" is free text`},
		{7, "info", "required, with no default"},
		{4, "warning", `names "image.tag", "image-tag" all become PARAM_IMAGE_TAG`},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d problems: %+v", len(got), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Index != w.index || g.Severity != w.severity || !strings.Contains(g.Message, w.message) || g.Parameter != as[w.index].Name {
			t.Errorf("problem %d = %+v, want %+v", i, g, w)
		}
	}
}

func TestFitsItemType(t *testing.T) {
	for _, tc := range []struct {
		itemType, value string
		ok              bool
	}{
		{"number", "", true}, {"number", "1", true}, {"number", "-0.5e3", true}, {"number", " 2 ", true},
		{"number", "01", false}, {"number", "1,5", false}, {"number", "NaN", false}, {"number", "0x10", false},
		{"boolean", "true", true}, {"boolean", "false", true}, {"boolean", "", true},
		{"boolean", "True", false}, {"boolean", "yes", false}, {"boolean", "1", false},
		{"string", "anything", true}, {"", "x", true}, {"bytes", "x", true},
	} {
		if ok, why := fitsItemType(tc.itemType, tc.value); ok != tc.ok || (ok == (why != "")) {
			t.Errorf("fitsItemType(%q, %q) = %v, %q", tc.itemType, tc.value, ok, why)
		}
	}
}
