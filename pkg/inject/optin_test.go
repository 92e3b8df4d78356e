package inject

import (
	"strings"
	"testing"
)

// argo-helm's podLabels with an unquoted true renders a boolean label: the
// offline commands say so in plain words, naming the label and the fix.
func TestNonStringLabelIsAPlainError(t *testing.T) {
	doc := `apiVersion: apps/v1
kind: Deployment
metadata: {name: argocd-repo-server}
spec:
  template:
    metadata:
      labels: {cmp-injector.io/inject: true, tier: 3}
      annotations: {cmp-injector.io/plugins: helm}
    spec:
      containers: [{name: repo-server, image: x}]
`
	_, err := IntoResources(strings.NewReader(doc), testCat(t), "argocd")
	if err == nil {
		t.Fatal("accepted a boolean label")
	}
	for _, want := range []string{
		`Deployment argocd-repo-server: label "cmp-injector.io/inject" in spec.template.metadata.labels is the boolean true, not a string: quote it (cmp-injector.io/inject: "true")`,
		`label "tier" in spec.template.metadata.labels is the number 3`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\nlacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "unmarshal") {
		t.Errorf("a Go error reached the user: %v", err)
	}
}

// The opt-in on the Deployment's own metadata (argo-helm's
// repoServer.deploymentLabels) is not the pod's: skipped, with a hint.
func TestWorkloadOptInHints(t *testing.T) {
	doc := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: argocd-repo-server
  labels: {cmp-injector.io/inject: "true"}
  annotations: {cmp-injector.io/plugins: helm}
spec:
  template:
    metadata: {labels: {app: x}}
    spec:
      containers: [{name: repo-server, image: x}]
`
	objs, err := IntoResources(strings.NewReader(doc), testCat(t), "argocd")
	if err != nil {
		t.Fatal(err)
	}
	o := objs[0]
	if o.Report.Reasons[0] != ReasonNotLabelled || len(o.Hints) != 2 ||
		!strings.Contains(o.Hints[0], "repoServer.podLabels, not repoServer.deploymentLabels") ||
		!strings.Contains(o.Hints[1], "repoServer.podAnnotations") {
		t.Fatalf("%v, hints %q", o.Report.Reasons, o.Hints)
	}
	// Set where the webhook reads them, no hint.
	objs, err = IntoResources(strings.NewReader(stream), testCat(t), "argocd")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range Flatten(objs) {
		if len(o.Hints) > 0 {
			t.Errorf("%s: hints %q", o.ID(), o.Hints)
		}
	}
}
