package jsonnetplugin

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/params"
)

func str(s string) *string { return &s }

func TestArgv(t *testing.T) {
	t.Run("no parameters evaluate main.jsonnet", func(t *testing.T) {
		argv, warnings, err := jsonnetArgs(nil)
		if err != nil || len(warnings) != 0 || !reflect.DeepEqual(argv, []string{"--", "main.jsonnet"}) {
			t.Errorf("argv %q, warnings %q, err %v", argv, warnings, err)
		}
	})
	t.Run("every parameter, maps in flag then key order", func(t *testing.T) {
		argv, warnings, err := jsonnetArgs([]params.AppParameter{
			{Name: "libs", Array: []string{"../vendor", "lib"}},
			{Name: "tla-code", Map: map[string]string{"replicas": "2"}},
			{Name: "ext-vars", Map: map[string]string{"zone": "b", "env": "prod"}},
			{Name: "tlas", Map: map[string]string{"name": "web"}},
			{Name: "ext-code", Map: map[string]string{"debug": "true"}},
			{Name: "main", String: str("apps/web.jsonnet")},
		})
		want := []string{"--ext-str", "env=prod", "--ext-str", "zone=b", "--ext-code", "debug=true",
			"--tla-str", "name=web", "--tla-code", "replicas=2", "--jpath", "../vendor", "--jpath", "lib", "--", "apps/web.jsonnet"}
		if err != nil || len(warnings) != 0 || !reflect.DeepEqual(argv, want) {
			t.Errorf("argv %q\nwant %q (warnings %q, err %v)", argv, want, warnings, err)
		}
	})
	t.Run("values and a file that look like flags stay arguments", func(t *testing.T) {
		argv, _, err := jsonnetArgs([]params.AppParameter{
			{Name: "ext-vars", Map: map[string]string{"x": "--exec", "--y": "$(id)\n'q'"}},
			{Name: "main", String: str("-e")},
		})
		want := []string{"--ext-str", "--y=$(id)\n'q'", "--ext-str", "x=--exec", "--", "-e"}
		if err != nil || !reflect.DeepEqual(argv, want) {
			t.Errorf("argv %q, want %q (%v)", argv, want, err)
		}
	})
	t.Run("unknown parameters are warned about", func(t *testing.T) {
		_, warnings, err := jsonnetArgs([]params.AppParameter{{Name: "extVars", String: str("x")}})
		if err != nil || len(warnings) != 1 || !strings.Contains(warnings[0], `unknown parameter "extVars"`) {
			t.Errorf("warnings %q, err %v", warnings, err)
		}
	})
	for _, tc := range []struct {
		name string
		ps   []params.AppParameter
		want string
	}{
		{"a name with =", []params.AppParameter{{Name: "tlas", Map: map[string]string{"a=b": "c"}}}, `name "a=b" must be non-empty and hold no '='`},
		{"an empty name", []params.AppParameter{{Name: "ext-code", Map: map[string]string{"": "1"}}}, `name "" must be non-empty`},
		{"an absolute main", []params.AppParameter{{Name: "main", String: str("/etc/passwd")}}, `parameter main: "/etc/passwd" must be a path relative`},
		{"an absolute lib", []params.AppParameter{{Name: "libs", Array: []string{"/usr"}}}, `parameter libs: "/usr" must be a path relative`},
		{"an empty main", []params.AppParameter{{Name: "main", String: str("")}}, `parameter main: "" must be`},
		{"main as an array", []params.AppParameter{{Name: "main", Array: []string{"a"}}}, "parameter main: want a string"},
		{"a map as a string", []params.AppParameter{{Name: "ext-vars", String: str("a=b")}}, "parameter ext-vars: want a map"},
		{"libs as a map", []params.AppParameter{{Name: "libs", Map: map[string]string{"a": "b"}}}, "parameter libs: want an array"},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			argv, _, err := jsonnetArgs(tc.ps)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("argv %q, err %v; want an error with %q", argv, err, tc.want)
			}
		})
	}
}
