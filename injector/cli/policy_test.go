package cli

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestPolicyCommandPrintsTheSet(t *testing.T) {
	var out bytes.Buffer
	if err := run("policy", []string{"--catalog", catalogFile, "--name", "argocd-cmp"}, nil, &out); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, doc := range strings.Split(out.String(), "\n---\n") {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		if obj.Metadata.Name != "argocd-cmp" {
			t.Errorf("%s named %q", obj.Kind, obj.Metadata.Name)
		}
		kinds = append(kinds, obj.Kind)
	}
	if got := strings.Join(kinds, ","); got != "ValidatingAdmissionPolicy,ValidatingAdmissionPolicyBinding,MutatingAdmissionPolicy,MutatingAdmissionPolicyBinding" {
		t.Errorf("kinds %s", got)
	}
	out.Reset()
	if err := run("policy", []string{"--catalog", catalogFile, "--bindings=false"}, nil, &out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "Binding") {
		t.Error("--bindings=false printed a binding")
	}
}

func TestPolicyCommandRefusesBadInput(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("kind: PluginCatalog\nplugins: {x: {}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "--catalog is required"},
		{[]string{"--catalog", catalogFile, "--watch"}, 2, "--watch needs --apply"},
		{[]string{"--catalog", catalogFile, "--apply", "--reconcile"}, 2, "need --watch"},
		{[]string{"--catalog", catalogFile, "--apply", "--watch", "--resync", "0s"}, 2, "must be positive"},
		{[]string{"--catalog", bad}, 1, "catalog " + bad},
		{[]string{"--catalog", catalogFile, "--apply", "--kubeconfig", filepath.Join(t.TempDir(), "missing")}, 1, "missing"},
	} {
		code, stderr := runCode("policy", c.args, nil, io.Discard)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("policy %v: exit %d, stderr %q; want exit %d saying %q", c.args, code, stderr, c.code, c.want)
		}
	}
}
