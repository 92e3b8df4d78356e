package injector

import (
	"bytes"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
)

const stream = `# a comment-only document
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm, namespace: argocd}
data: {k: v}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: ds}
spec:
  template:
    metadata:
      labels: {cmp-injector.io/inject: "true"}
      annotations: {cmp-injector.io/plugins: helm}
    spec:
      containers: [{name: argocd-repo-server, image: x}]
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs, namespace: elsewhere}
spec:
  template:
    metadata: {labels: {app: x}}
    spec:
      containers: [{name: app, image: x}]
`

func TestProcessStream(t *testing.T) {
	cat, err := catalog.Load("testdata/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Process(strings.NewReader(stream), cat, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 3 {
		t.Fatalf("%d objects", len(objs))
	}
	if objs[0].Report != nil || !strings.Contains(string(objs[0].Output), "data: {k: v}") {
		t.Errorf("ConfigMap not passed through verbatim: %s", objs[0].Output)
	}
	if objs[1].Report.Decision != inject.Injected {
		t.Errorf("DaemonSet: %s", objs[1].Report.Message())
	}
	if objs[2].Report.Decision != inject.Skipped {
		t.Errorf("ReplicaSet: %s", objs[2].Report.Message())
	}
	var out bytes.Buffer
	if err := WriteObjects(&out, objs); err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(out.String(), "\n---\n")
	if len(docs) != 3 {
		t.Fatalf("%d documents written", len(docs))
	}
	var ds map[string]any
	if err := yaml.Unmarshal([]byte(docs[1]), &ds); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(docs[1], "name: cmp-helm") {
		t.Errorf("DaemonSet output lacks the sidecar:\n%s", docs[1])
	}
	var ex bytes.Buffer
	if err := Explain(&ex, objs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"ConfigMap argocd/cm: no pod template, passed through",
		"DaemonSet ds: injected plugins: helm [injected]",
		"init containers: cmp-injector-copy, cmp-helm",
		"ReplicaSet elsewhere/rs: skipped: no label cmp-injector.io/inject=true on the pod (template), so it is not opted in [not_labelled]",
	} {
		if !strings.Contains(ex.String(), want) {
			t.Errorf("explain lacks %q:\n%s", want, ex.String())
		}
	}
}

func TestProcessDenialsAndBadInput(t *testing.T) {
	cat, err := catalog.Load("testdata/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	denied := strings.Replace(stream, "plugins: helm", "plugins: kustomize", 1)
	objs, err := Process(strings.NewReader(denied), cat, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	err = Denials(objs)
	if err == nil || !strings.HasPrefix(err.Error(), `DaemonSet ds: cmp-injector denied pod: plugin "kustomize" is not enabled in namespace "team-a"`) {
		t.Errorf("Denials: %v", err)
	}
	var ex bytes.Buffer
	_ = Explain(&ex, objs)
	if !strings.Contains(ex.String(), "  - plugin_not_enabled: plugin \"kustomize\"") {
		t.Errorf("explain:\n%s", ex.String())
	}
	for _, bad := range []string{"kind: Pod\napiVersion: v1\nspec: [", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {template: 3}\n"} {
		if _, err := Process(strings.NewReader(bad), cat, ""); err == nil || !strings.Contains(err.Error(), "document 1") {
			t.Errorf("bad input %q: %v", bad, err)
		}
	}
}
