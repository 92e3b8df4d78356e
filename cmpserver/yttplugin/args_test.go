package yttplugin

import (
	"strings"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/params"
)

func str(s string) *string { return &s }

func TestYttArgs(t *testing.T) {
	argv, warnings, err := yttArgs([]params.AppParameter{
		{Name: paramDataValues, Map: map[string]string{"name": "shop", "image.tag": "$(id) -x"}},
		{Name: paramDataValuesYAML, Map: map[string]string{"replicas": "3"}},
		{Name: paramValuesFiles, Array: []string{"envs/prod.yml"}},
		{Name: "unknown", String: str("x")},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "-f . --data-values-file envs/prod.yml --data-value image.tag=$(id) -x --data-value name=shop --data-value-yaml replicas=3"
	if got := strings.Join(argv, " "); got != want {
		t.Errorf("argv %q\nwant %q", got, want)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], `unknown parameter "unknown"`) {
		t.Errorf("warnings %v", warnings)
	}
	// The value stays one argument: ytt reads it as a value, never a flag.
	if argv[4] != "--data-value" || argv[5] != "image.tag=$(id) -x" {
		t.Errorf("argv %q", argv)
	}
}

func TestYttArgsRefusals(t *testing.T) {
	for _, tc := range []struct {
		p    params.AppParameter
		want string
	}{
		{params.AppParameter{Name: paramFiles, Array: []string{"/etc"}}, "must be a path relative"},
		{params.AppParameter{Name: paramValuesFiles, Array: []string{""}}, "must be a path relative"},
		{params.AppParameter{Name: paramDataValues, Map: map[string]string{"a=b": "c"}}, "hold no '='"},
		{params.AppParameter{Name: paramDataValues, String: str("x")}, "want a map"},
		{params.AppParameter{Name: paramFiles, String: str("x")}, "want an array"},
	} {
		if _, _, err := yttArgs([]params.AppParameter{tc.p}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want %q", tc.p, err, tc.want)
		}
	}
}
