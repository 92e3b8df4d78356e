package cdk8splugin

import (
	"strings"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/params"
)

func str(s string) *string { return &s }

func TestSynthArgs(t *testing.T) {
	s, err := synthArgs([]params.AppParameter{
		{Name: paramEnv, Map: map[string]string{"REPLICAS": "3", "IMAGE": "nginx:$(id)"}},
		{Name: paramApp, String: str("node other.js")},
		{Name: "nope", String: str("x")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(s.argv, " "), "synth --stdout --check-upgrade=false --app node other.js"; got != want {
		t.Errorf("argv %q\nwant %q", got, want)
	}
	if got, want := strings.Join(s.env, " "), "IMAGE=nginx:$(id) REPLICAS=3"; got != want {
		t.Errorf("env %q, want %q", got, want)
	}
	if !s.hasApp || len(s.warnings) != 1 || !strings.Contains(s.warnings[0], `"nope"`) {
		t.Errorf("hasApp %v warnings %v", s.hasApp, s.warnings)
	}
	for _, p := range []params.AppParameter{
		{Name: paramEnv, String: str("A=1")},
		{Name: paramEnv, Map: map[string]string{"A-B": "1"}},
		{Name: paramEnv, Map: map[string]string{"NODE_OPTIONS": "--require /tmp/x.js"}},
		{Name: paramEnv, Map: map[string]string{"path": "/tmp"}},
		{Name: paramEnv, Map: map[string]string{"LD_PRELOAD": "/tmp/x.so"}},
		{Name: paramApp, String: str(" ")},
		{Name: paramApp, Array: []string{"node", "main.js"}},
	} {
		if _, err := synthArgs([]params.AppParameter{p}); err == nil {
			t.Errorf("%+v: no error", p)
		}
	}
}

func TestWithoutStack(t *testing.T) {
	in := "/app/main.js:9\n  throw new Error('x');\n  ^\n\nError: PodSpec must have at least 1 container\n    at KubeDeployment.toJson (/x.js:1:2)\n    at Array.map (<anonymous>)\n\nNode.js v18.20.4\nError: command \"node main.js \" at /app returned a non-zero exit code 1\n    at ChildProcess.<anonymous> (/y.js:77:27)"
	want := "/app/main.js:9\n  throw new Error('x');\n  ^\n\nError: PodSpec must have at least 1 container\n\nNode.js v18.20.4\nError: command \"node main.js \" at /app returned a non-zero exit code 1"
	if got := withoutStack(in); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := withoutStack("at the top: not a frame"); got != "at the top: not a frame" {
		t.Errorf("a line that starts with at but is not indented was dropped: %q", got)
	}
}
