package e2e

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// TestUpdatesOfInjectedPods: a user who may only create and patch pods cannot
// change what the injector owns in them (a sidecar's image, its plugin.yaml
// annotation), nor create a pre-injected pod whose owned parts were edited; the
// injector's own identity (--trusted-user) can, and ordinary changes pass.
func TestUpdatesOfInjectedPods(t *testing.T) {
	dir := t.TempDir()
	in, err := harness.NewInjector(env.bins["cmp-injector"], dir, catalogFor(t, true, map[string][]string{"*": {"helm"}}), env.logFile)
	if err != nil {
		t.Fatal(err)
	}
	// The admin plays the injector's own service account.
	in.ExtraArgs = []string{"--trusted-user=admin"}
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Stop() })
	installWebhook(t, in)
	ns := newNamespace(t, "upd", enabledNS)
	waitActive(t, ns)

	admin := env.cp.Client()
	editor := grantPodEditor(t, ns, "pods")

	pod := loadPod(t, "repo-server-pod.yaml")
	createAs(t, editor, ns, pod)
	podPath := "/api/v1/namespaces/" + ns + "/pods/" + pod.Name
	for _, tc := range []struct {
		name, patch string
		allowed     bool
		want        string
	}{
		{"sidecar image", `{"spec":{"initContainers":[{"name":"cmp-helm","image":"evil/anything:1"}]}}`, false,
			`image "evil/anything:1" of container "cmp-helm" is not allowed`},
		{"config annotation", fmt.Sprintf(`{"metadata":{"annotations":{%q:"kind: ConfigManagementPlugin\nspec: {generate: {command: [sh, -c, id]}}"}}}`,
			keys.ConfigAnnotationPrefix+"helm"), false, `differs from plugin "helm"'s config`},
		{"status annotation", fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, keys.StatusAnnotation), false, "must not be changed or removed"},
		// Would make the reconciler restart the Deployment (rollout: auto).
		{"plugins annotation", fmt.Sprintf(`{"metadata":{"annotations":{%q:"helm,kustomize"}}}`, keys.PluginsAnnotation), false,
			`annotation "cmp-injector.io/plugins" of an injected pod must not be changed`},
		{"a label", `{"metadata":{"labels":{"team":"a"}}}`, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := editor.StrategicPatch(podPath, []byte(tc.patch))
			if tc.allowed {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var apiErr *harness.APIError
			if !errors.As(err, &apiErr) || !strings.Contains(apiErr.Message, tc.want) {
				t.Fatalf("patch %s: %v, want a denial containing %q", tc.patch, err, tc.want)
			}
			t.Logf("as expected, the update is denied: %s", apiErr.Message)
		})
	}
	t.Run("the injector's own identity may update", func(t *testing.T) {
		if err := admin.StrategicPatch(podPath, []byte(`{"spec":{"initContainers":[{"name":"cmp-helm","image":"evil/anything:1"}]}}`)); err != nil {
			t.Fatalf("trusted user refused: %v", err)
		}
	})

	t.Run("an edited pre-injected pod is checked on create", func(t *testing.T) {
		pre := preRendered(t, in, ns, "repo-server-pod.yaml")
		pre.Name = "pre-rendered"
		if _, err := editor.CreatePod(ns, pre.DeepCopy(), true); err != nil {
			t.Fatalf("untouched pre-injected pod refused: %v", err)
		}
		pre.Annotations[keys.ConfigAnnotationPrefix+"helm"] += "\n# edited after rendering\n"
		_, err = editor.CreatePod(ns, pre, false)
		var apiErr *harness.APIError
		if !errors.As(err, &apiErr) || !strings.Contains(apiErr.Message, `differs from plugin "helm"'s config`) {
			t.Fatalf("edited pre-injected pod: %v", err)
		}
	})
}
