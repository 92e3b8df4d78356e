package plugins

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/params"
)

// TestCdk8s runs the cdk8s plugin.yaml with bin/cdk8s (the cmp-cdk8s image's
// Node.js and cdk8s-cli, hack/tools.sh) on cdk8s's getting-started app as
// `cdk8s init typescript-app` lays it out (npx ts-node main.ts, no
// node_modules), and on an app whose construct refuses its input.
func TestCdk8s(t *testing.T) {
	if _, err := os.Stat(filepath.Join(toolsBin, "cdk8s")); err != nil {
		t.Fatalf("cdk8s not found in %s: run hack/tools.sh cdk8s", toolsBin)
	}
	inv := func(app string, ps ...params.AppParameter) invocation {
		return invocation{config: "cdk8s", app: filepath.Join("cdk8s", app), params: ps}
	}
	t.Run("the TypeScript app through npx ts-node", func(t *testing.T) {
		objs := generate(t, inv("hello"))
		if got := strings.Join(names(objs), ","); got != "Deployment/hello-deployment-c86af7a3,Service/hello" {
			t.Fatalf("objects %s", got)
		}
		d := objs["Deployment/hello-deployment-c86af7a3"]
		if r := field(d, "spec", "replicas"); r != float64(1) {
			t.Errorf("replicas %v, want the app's default 1", r)
		}
		if img := field(d, "spec", "template", "spec", "containers", 0, "image"); img != "paulbouwer/hello-kubernetes:1.10" {
			t.Errorf("image %v", img)
		}
		if typ := field(objs["Service/hello"], "spec", "type"); typ != "LoadBalancer" {
			t.Errorf("service type %v", typ)
		}
	})
	t.Run("the env parameter is the app's process.env", func(t *testing.T) {
		objs := generate(t, inv("hello", params.AppParameter{Name: "env", Map: map[string]string{"REPLICAS": "3", "MESSAGE": "$(id) stays a string"}}))
		d := objs["Deployment/hello-deployment-c86af7a3"]
		if r := field(d, "spec", "replicas"); r != float64(3) {
			t.Errorf("replicas %v, want 3", r)
		}
		if msg := field(d, "spec", "template", "spec", "containers", 0, "env", 0, "value"); msg != "$(id) stays a string" {
			t.Errorf("MESSAGE %v", msg)
		}
	})
	t.Run("the app parameter replaces cdk8s.yaml's command", func(t *testing.T) {
		i := inv("broken", params.AppParameter{Name: "app", String: str("npx ts-node ../hello/main.ts")})
		i.args = []string{"--repo-root", "testdata"}
		objs := generate(t, i)
		if len(objs) != 2 {
			t.Errorf("objects %v, want hello's two", names(objs))
		}
	})
	t.Run("cdk8s's error, without Node.js's stack, is what the user reads", func(t *testing.T) {
		_, msg := refusedOutput(t, withAction(inv("broken"), "generate"), "PodSpec must have at least 1 container")
		if strings.Contains(msg, "    at ") {
			t.Errorf("the stack frames are in the message:\n%s", msg)
		}
	})
	t.Run("a reserved variable is refused before anything runs", func(t *testing.T) {
		refused(t, withAction(inv("hello", params.AppParameter{Name: "env", Map: map[string]string{"NODE_OPTIONS": "--require /tmp/x.js"}}), "generate"), "NODE_OPTIONS is reserved")
	})
	t.Run("a directory without cdk8s.yaml", func(t *testing.T) {
		refused(t, withAction(inv("../ytt/app"), "generate"), "no cdk8s.yaml in the app directory")
	})
	t.Run("discovery by cdk8s.yaml", func(t *testing.T) {
		for app, want := range map[string]string{"cdk8s/hello": "true", "ytt/app": "false"} {
			out, stderr, err := run(t, invocation{action: "match", config: "cdk8s", app: app})
			if err != nil || strings.TrimSpace(out) != want {
				t.Errorf("match %s = %q %v, want %s; %s", app, out, err, want, stderr)
			}
		}
	})
}
