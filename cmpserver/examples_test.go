package cmpserver

import (
	"encoding/json"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/pkg/params"
	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
)

// The parameterized-CMP proposal's examples, served over a socket with jq doing
// the work as in the proposal.

// example1 is the proposal's "trivial parameterized CMP", verbatim.
const example1 = `apiVersion: argoproj.io/v1alpha1
kind: ConfigManagementPlugin
metadata:
  name: trivial-cmp
spec:
  version: v1.0
  generate:
    command: 
      - sh
      - -c
      - |
        # Pull one parameter value from the "main" section of the given parameters.
        CM_NAME_SUFFIX=$(echo "$ARGOCD_APP_PARAMETERS" | jq -r '.["main"][] | select(.name == "cm-name-suffix").value')
        cat << EOM
        {
          "kind": "ConfigMap",
          "apiVersion": "v1",
          "metadata": {
            "name": "$ARGOCD_APP_NAME-$CM_NAME_SUFFIX",
            "namespace": "$ARGOCD_APP_NAMESPACE"
          }
        }
        EOM
  discover:
    fileName: "./trivial-cmp"
  parameters:
    command:
      - sh
      - -c
      - |
        echo '[{"name": "cm-name-suffix"}]'
`

func requireJQ(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("jq"); err != nil {
		t.Fatal("jq is required by the proposal's examples: apt-get install jq")
	}
}

func suffixParams(suffix string) []string {
	env, _ := client.App{Name: "guestbook", Namespace: "demo-ns", HasPlugin: true,
		Parameters: []params.AppParameter{{Name: "cm-name-suffix", String: &suffix}}}.Environ()
	return env
}

func TestExample1TrivialCMP(t *testing.T) {
	t.Parallel()
	requireJQ(t)
	// Verbatim, the example predates the final schema: "parameters.command" is
	// now "parameters.dynamic.command" (we warn), and ARGOCD_APP_PARAMETERS is a
	// list, so jq's .["main"] finds nothing and the suffix is empty.
	_, warnings, err := pluginconfig.Parse([]byte(example1))
	if err != nil || len(warnings) != 1 || !strings.Contains(warnings[0], `"spec.parameters.command"`) {
		t.Fatalf("warnings %q, %v", warnings, err)
	}
	root := writeTree(t, map[string]string{"trivial-cmp": ""})
	req := client.Request{RepoRoot: root, Env: suffixParams("abc")}
	ts := startServer(t, example1, nil)
	if m, err := ts.dial(t).Match(ctxTimeout(t, 30*time.Second), req); err != nil || !m.Supported {
		t.Fatalf("Match = %+v, %v", m, err)
	}
	got, err := ts.dial(t).Generate(ctxTimeout(t, 30*time.Second), req)
	wantCM := func(name string) string {
		return `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"` + name + `","namespace":"demo-ns"}}`
	}
	if err != nil || len(got) != 1 || compact(t, got[0]) != wantCM("guestbook-") {
		t.Fatalf("verbatim Generate = %q, %v", got, err)
	}

	// Updated to the final schema, it does what the proposal describes.
	updated := strings.Replace(example1, "  parameters:\n    command:", "  parameters:\n    dynamic:\n      command:", 1)
	updated = strings.Replace(updated, `.["main"][] | select(.name == "cm-name-suffix").value`, `.[] | select(.name == "cm-name-suffix").string`, 1)
	ts2 := startServer(t, updated, nil)
	got, err = ts2.dial(t).Generate(ctxTimeout(t, 30*time.Second), req)
	if err != nil || len(got) != 1 || compact(t, got[0]) != wantCM("guestbook-abc") {
		t.Fatalf("updated Generate = %q, %v", got, err)
	}
	ann, err := ts2.dial(t).Parameters(ctxTimeout(t, 30*time.Second), req)
	if err != nil || !reflect.DeepEqual(ann, []params.Announcement{{Name: "cm-name-suffix"}}) {
		t.Fatalf("Parameters = %+v, %v", ann, err)
	}
}

// example3 is the proposal's "simple Helm CMP" with its generate.sh and
// get-parameters.sh inlined. helm is replaced by printing the command line it
// would run, and "yq e -o=p" by an awk one-liner printing the same "key = value"
// lines; the jq parts are the proposal's.
const example3Plugin = `apiVersion: argoproj.io/v1alpha1
kind: ConfigManagementPlugin
metadata:
  name: simple-helm-cmp
spec:
  version: v1.0
  generate:
    command:
    - sh
    - -c
    - |
      ARGUMENTS=$(echo "$ARGOCD_APP_PARAMETERS" | jq -r '.[] | select(.name == "values-files").array | .[] | "--values=" + .')
      PARAMETERS=$(echo "$ARGOCD_APP_PARAMETERS" | jq -r '.[] | select(.name == "helm-parameters").map | to_entries | map("\(.key)=\(.value)") | .[] | "--set=" + .')
      ARGUMENTS="$ARGUMENTS\n$PARAMETERS"
      CMD=$(echo "$ARGUMENTS" | xargs echo helm template .)
      jq -n --arg cmd "$CMD" '{apiVersion: "v1", kind: "ConfigMap", metadata: {name: "helm"}, data: ({cmd: $cmd} + (env | with_entries(select((.key | startswith("PARAM_")) or .key == "ARGOCD_APP_PARAMETERS"))))}'
  discover:
    fileName: "./values.yaml"
  parameters:
    static:
    - name: values-files
      title: VALUES FILES
      collectionType: array
    dynamic:
      command:
      - sh
      - -c
      - |
        awk '/^[a-z]+:$/ {p=substr($1, 1, length($1)-1); next} {k=$1; sub(":$", "", k); print p "." k " = " $2}' values.yaml | jq --slurp --raw-input '
          [{
            name: "helm-parameters",
            title: "Helm Parameters",
            collectionType: "map",
            map: split("\n") | map(select(. != "")) | map(capture("(?<key>.*) = (?<value>.*)")) | from_entries
          }]'
`

func TestExample3SimpleHelmCMP(t *testing.T) {
	t.Parallel()
	requireJQ(t)
	ts := startServer(t, example3Plugin, nil)
	root := writeTree(t, map[string]string{"values.yaml": "image:\n  repo: quay.io/argoproj/argocd\n  tag: latest\n", "a.yaml": "", "b.yaml": ""})
	ann, err := ts.dial(t).Parameters(ctxTimeout(t, 30*time.Second), client.Request{RepoRoot: root})
	wantAnn := []params.Announcement{
		{Name: "helm-parameters", Title: "Helm Parameters", CollectionType: "map", Map: map[string]string{"image.repo": "quay.io/argoproj/argocd", "image.tag": "latest"}},
		{Name: "values-files", Title: "VALUES FILES", CollectionType: "array"},
	}
	if err != nil || !reflect.DeepEqual(ann, wantAnn) {
		t.Fatalf("Parameters = %+v, %v", ann, err)
	}

	env, err := client.App{Name: "helm-app", HasPlugin: true, Parameters: []params.AppParameter{
		{Name: "values-files", Array: []string{"a.yaml", "b.yaml"}},
		{Name: "helm-parameters", Map: map[string]string{"image.repo": "alpine", "image.tag": "latest"}},
	}}.Environ()
	if err != nil {
		t.Fatal(err)
	}
	cm := generateConfigMap(t, ts, root, env)
	want := map[string]string{
		"cmd":                              "helm template . --values=a.yaml --values=b.yaml --set=image.repo=alpine --set=image.tag=latest",
		"ARGOCD_APP_PARAMETERS":            `[{"array":["a.yaml","b.yaml"],"name":"values-files"},{"map":{"image.repo":"alpine","image.tag":"latest"},"name":"helm-parameters"}]`,
		"PARAM_VALUES_FILES_0":             "a.yaml",
		"PARAM_VALUES_FILES_1":             "b.yaml",
		"PARAM_HELM_PARAMETERS_IMAGE_REPO": "alpine",
		"PARAM_HELM_PARAMETERS_IMAGE_TAG":  "latest",
	}
	if !reflect.DeepEqual(cm.Data, want) {
		t.Errorf("generate saw %q\nwant %q", cm.Data, want)
	}
}

// The proposal's worked example of parameters → env, end to end through a socket.
func TestWorkedExampleEnvOverSocket(t *testing.T) {
	t.Parallel()
	requireJQ(t)
	ts := startServer(t, example3Plugin, nil)
	root := writeTree(t, map[string]string{"values.yaml": ""})
	values := "resources:\n  cpu: 100m\n  memory: 128Mi"
	env, _ := client.App{Name: "x", HasPlugin: true, Parameters: []params.AppParameter{
		{Name: "values", String: &values},
		{Name: "values-files", Array: []string{"values.yaml"}},
		{Name: "helm-parameters", Map: map[string]string{"image.repository": "my.example.com/gcr-proxy/heptio-images/ks-guestbook-demo", "image.tag": "0.1"}},
	}}.Environ()
	cm := generateConfigMap(t, ts, root, env)
	want := map[string]string{
		"PARAM_VALUES":                           values,
		"PARAM_VALUES_FILES_0":                   "values.yaml",
		"PARAM_HELM_PARAMETERS_IMAGE_REPOSITORY": "my.example.com/gcr-proxy/heptio-images/ks-guestbook-demo",
		"PARAM_HELM_PARAMETERS_IMAGE_TAG":        "0.1",
		"ARGOCD_APP_PARAMETERS":                  `[{"name":"values","string":"resources:\n  cpu: 100m\n  memory: 128Mi"},{"array":["values.yaml"],"name":"values-files"},{"map":{"image.repository":"my.example.com/gcr-proxy/heptio-images/ks-guestbook-demo","image.tag":"0.1"},"name":"helm-parameters"}]`,
	}
	delete(cm.Data, "cmd")
	if !reflect.DeepEqual(cm.Data, want) {
		t.Errorf("generate saw %q\nwant %q", cm.Data, want)
	}
}

// compact drops the whitespace jq and heredocs add, keeping key order.
func compact(t *testing.T, s string) string {
	t.Helper()
	if !json.Valid([]byte(s)) {
		t.Fatalf("not JSON: %s", s)
	}
	return strings.Join(strings.Fields(s), "")
}

// generateConfigMap generates over the socket and decodes the single ConfigMap the
// example plugins print.
func generateConfigMap(t *testing.T, ts *testServer, root string, env []string) (cm struct{ Data map[string]string }) {
	t.Helper()
	got, err := ts.dial(t).Generate(ctxTimeout(t, 30*time.Second), client.Request{RepoRoot: root, Env: env})
	if err != nil || len(got) != 1 {
		t.Fatalf("Generate = %q, %v", got, err)
	}
	if err := json.Unmarshal([]byte(got[0]), &cm); err != nil {
		t.Fatal(err)
	}
	return cm
}
