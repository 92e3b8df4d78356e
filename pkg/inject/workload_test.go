package inject

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"
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

func TestIntoResourcesStream(t *testing.T) {
	cat := testCat(t)
	objs, err := IntoResources(strings.NewReader(stream), cat, "argocd")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 3 {
		t.Fatalf("%d objects", len(objs))
	}
	if objs[0].Report != nil || !strings.Contains(string(objs[0].Output), "data: {k: v}") {
		t.Errorf("ConfigMap not passed through verbatim: %s", objs[0].Output)
	}
	if objs[1].Report.Decision != Injected || !strings.Contains(string(objs[1].Output), "name: cmp-helm") {
		t.Errorf("DaemonSet: %s\n%s", objs[1].Report.Message(), objs[1].Output)
	}
	checkPatched(t, objs[1], []string{"spec", "template"})
	if objs[2].Report.Decision != Skipped || objs[2].Report.Reasons[0] != ReasonNotLabelled {
		t.Errorf("ReplicaSet: %s", objs[2].Report.Message())
	}
}

// checkPatched: the pod in the output is the Report's pod, the decision's
// own result, whatever the YAML writing did.
func checkPatched(t *testing.T, o *Object, path []string) {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal(o.Output, &obj); err != nil {
		t.Fatalf("output is not YAML: %v\n%s", err, o.Output)
	}
	podJSON, err := PodJSON(obj, path)
	if err != nil {
		t.Fatal(err)
	}
	var got corev1.Pod
	if err := json.Unmarshal(podJSON, &got); err != nil {
		t.Fatal(err)
	}
	want := o.Report.Pod.DeepCopy()
	want.TypeMeta = got.TypeMeta
	if !equality.Semantic.DeepEqual(&got, want) {
		t.Errorf("%s: the output's pod is not the Report's pod:\n%s", o.ID(), o.Output)
	}
}

const labelled = `
      metadata:
        labels: {cmp-injector.io/inject: "true"}
        annotations: {cmp-injector.io/plugins: helm}
      spec:
        containers: [{name: argocd-repo-server, image: x}]`

// Jobs, CronJobs and Lists carry pods too; each List item is decided on its own.
func TestIntoResourcesJobsCronJobsLists(t *testing.T) {
	cat := testCat(t)
	in := `apiVersion: batch/v1
kind: Job
metadata: {name: j, namespace: argocd}
spec:
  template:` + strings.ReplaceAll(labelled, "\n      ", "\n    ") + `
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: c, namespace: argocd}
spec:
  schedule: "* * * * *"
  jobTemplate:
    spec:
      template:` + strings.ReplaceAll(labelled, "\n      ", "\n        ") + `
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: cm}
- apiVersion: v1
  kind: Pod
  metadata:
    name: p
    namespace: argocd
    labels: {cmp-injector.io/inject: "true"}
    annotations: {cmp-injector.io/plugins: helm}
  spec:
    containers: [{name: argocd-repo-server, image: x}]
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: d, namespace: team-a}
  spec:
    template:` + labelled + `
`
	objs, err := IntoResources(strings.NewReader(in), cat, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 3 || len(objs[2].Items) != 3 {
		t.Fatalf("%d objects", len(objs))
	}
	flat := Flatten(objs)
	want := []Decision{Injected, Injected, "", Injected, Denied}
	for i, o := range flat {
		got := Decision("")
		if o.Report != nil {
			got = o.Report.Decision
		}
		if got != want[i] {
			t.Errorf("%s: %q, want %q", o.ID(), got, want[i])
		}
	}
	if DeniedCount(objs) != 1 || Denials(objs) == nil || !strings.Contains(Denials(objs).Error(), `Deployment team-a/d: cmp-injector denied pod: plugin "helm" is not enabled in namespace "team-a"`) {
		t.Errorf("denials: %v", Denials(objs))
	}
	checkPatched(t, objs[0], []string{"spec", "template"})
	checkPatched(t, objs[1], []string{"spec", "jobTemplate", "spec", "template"})
	var list struct {
		Items []map[string]any `json:"items"`
	}
	if err := yaml.Unmarshal(objs[2].Output, &list); err != nil || len(list.Items) != 3 {
		t.Fatalf("List output: %v\n%s", err, objs[2].Output)
	}
	item := &Object{Kind: "Pod", Name: "p", Report: objs[2].Items[1].Report}
	item.Output, _ = yaml.Marshal(list.Items[1])
	checkPatched(t, item, nil)
}

// inject changes only what it adds: the rest of the document keeps its key
// order, comments and sequence style (GitOps diffs read them).
func TestIntoResourcesKeepsOrderAndComments(t *testing.T) {
	in := `# the repo-server, as we deploy it
kind: Deployment # kind before apiVersion, on purpose
apiVersion: apps/v1
metadata:
  name: argocd-repo-server
  namespace: argocd
spec:
  # two replicas for the PDB
  replicas: 2
  template:
    metadata:
      labels:
        cmp-injector.io/inject: "true" # opt in
      annotations:
        zz-last: "1"
        cmp-injector.io/plugins: helm
    spec:
      containers:
      - name: argocd-repo-server
        image: quay.io/argoproj/argocd:v3.1.0 # pinned
        args:
        - --loglevel=info
`
	objs, err := IntoResources(strings.NewReader(in), testCat(t), "")
	if err != nil {
		t.Fatal(err)
	}
	o := objs[0]
	if o.Report.Decision != Injected {
		t.Fatalf("%s", o.Report.Message())
	}
	checkPatched(t, o, []string{"spec", "template"})
	out := string(o.Output)
	// Every input line is in the output, in the same order.
	at := 0
	for _, line := range strings.Split(strings.TrimSpace(in), "\n") {
		i := strings.Index(out[at:], line+"\n")
		if i < 0 {
			t.Fatalf("output lacks %q after byte %d:\n%s", line, at, out)
		}
		at += i + len(line)
	}
	// What was added is block YAML: no JSON braces, plugin.yaml as a block.
	if strings.Contains(out, `{"name"`) || strings.Contains(out, "- {") || !strings.Contains(out, "config.cmp-injector.io/helm: |") {
		t.Errorf("added YAML is not block style:\n%s", out)
	}
	// A second pass leaves it as it is.
	again, err := IntoResources(bytes.NewReader(o.Output), testCat(t), "")
	if err != nil || again[0].Report.Reasons[0] != ReasonAlreadyInjected || !bytes.Equal(again[0].Output, o.Output) {
		t.Errorf("second pass: %v %v", err, again[0].Report.Reasons)
	}
}

func TestIntoResourcesBadInput(t *testing.T) {
	cat := testCat(t)
	for _, bad := range []string{
		"kind: Pod\napiVersion: v1\nspec: [",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {template: 3}\n",
		"apiVersion: v1\nkind: List\nitems: [3]\n",
	} {
		if _, err := IntoResources(strings.NewReader(bad), cat, ""); err == nil || !strings.Contains(err.Error(), "document 1") {
			t.Errorf("bad input %q: %v", bad, err)
		}
	}
}

// FuzzIntoResources: any input gives an error or objects; an injected object's
// output is YAML whose pod is the Report's, and a second pass keeps it as is.
func FuzzIntoResources(f *testing.F) {
	f.Add(stream)
	f.Add("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p, labels: {cmp-injector.io/inject: \"true\"}, annotations: {cmp-injector.io/plugins: helm}}\n  spec: {containers: [{name: a, image: x}]}\n")
	f.Add("kind: Pod\napiVersion: v1\nmetadata: &m {name: a, labels: {cmp-injector.io/inject: \"true\"}, annotations: {cmp-injector.io/plugins: helm}}\nspec: {containers: [{name: a, image: x}]}\nextra: *m\n")
	f.Add("# c\n---\n---\n")
	cat := testCat(f)
	f.Fuzz(func(t *testing.T, in string) {
		objs, err := IntoResources(strings.NewReader(in), cat, "argocd")
		if err != nil {
			return
		}
		for _, o := range objs {
			if o.Report == nil || o.Report.Decision != Injected {
				continue
			}
			path, _ := TemplatePath(yamlField(o.Output, "apiVersion"), o.Kind)
			checkPatched(t, o, path)
			again, err := IntoResources(bytes.NewReader(o.Output), cat, "argocd")
			if err != nil || len(again) != 1 || !bytes.Equal(again[0].Output, o.Output) {
				t.Fatalf("second pass: %v\n%s", err, o.Output)
			}
		}
	})
}

func yamlField(doc []byte, key string) string {
	var m map[string]any
	_ = yaml.Unmarshal(doc, &m)
	s, _ := m[key].(string)
	return s
}
