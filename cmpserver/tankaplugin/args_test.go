package tankaplugin

import (
	"strings"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/params"
)

func str(s string) *string { return &s }

func TestTkArgs(t *testing.T) {
	argv, warnings, err := tkArgs([]params.AppParameter{
		{Name: "tlas", Map: map[string]string{"replicas": "2", "tag": "$(id)"}},
		{Name: "ext-vars", Map: map[string]string{"cluster": "prod"}},
		{Name: paramTargets, Array: []string{"deployment/.*"}},
		{Name: "nope", String: str("x")},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "show . --dangerous-allow-redirect --ext-str cluster=prod --tla-str replicas=2 --tla-str tag=$(id) --target deployment/.*"
	if got := strings.Join(argv, " "); got != want {
		t.Errorf("argv %q\nwant %q", got, want)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], `"nope"`) {
		t.Errorf("warnings %v", warnings)
	}
	for _, p := range []params.AppParameter{
		{Name: paramName, String: str("")},
		{Name: paramTargets, String: str("x")},
		{Name: "tlas", Map: map[string]string{"a=b": "c"}},
	} {
		if _, _, err := tkArgs([]params.AppParameter{p}); err == nil {
			t.Errorf("%+v: no error", p)
		}
	}
}
