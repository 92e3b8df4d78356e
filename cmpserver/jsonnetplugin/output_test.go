package jsonnetplugin

import (
	"reflect"
	"strings"
	"testing"
)

func TestManifests(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      []string
	}{
		{"one object", `{"kind":"A"}`, []string{`{"kind":"A"}`}},
		{"an array, nested arrays flattened", "[{\"kind\":\"A\"},\n [{\"kind\":\"B\"}, [], null]]", []string{`{"kind":"A"}`, `{"kind":"B"}`}},
		{"null", "null\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs, err := manifests([]byte(tc.out))
			var got []string
			for _, d := range docs {
				got = append(got, string(d))
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("docs %q, err %v; want %q", got, err, tc.want)
			}
		})
	}
	for _, tc := range []struct{ out, want string }{
		{`"x"`, "the result is a string"},
		{`[{"kind":"A"}, [1]]`, "the result[1][0] is a number"},
		{`[true]`, "the result[0] is a boolean"},
		{`{"kind":`, "jsonnet printed no JSON value"},
	} {
		_, err := manifests([]byte(tc.out))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.out, err, tc.want)
		}
	}
}
