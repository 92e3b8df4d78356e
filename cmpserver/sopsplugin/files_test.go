package sopsplugin

import (
	"reflect"
	"testing"
)

func TestManifestFiles(t *testing.T) {
	got := manifestFiles([]string{"z.yaml", ".sops.yaml", "a.yml", "b.JSON", "README.md", "c.yaml.bak", ".hidden.json", "-x.yaml"})
	want := []string{"-x.yaml", "a.yml", "b.JSON", "z.yaml"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("manifestFiles = %q, want %q", got, want)
	}
	if format("b.JSON") != "json" || format("a.yml") != "yaml" {
		t.Error("format: want json for .json, yaml otherwise")
	}
}

func TestEncrypted(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		want          bool
	}{
		{"sops metadata", "apiVersion: v1\nkind: Secret\nstringData:\n  a: ENC[AES256_GCM,data:x]\nsops:\n  mac: ENC[x]\n  age: []\n", true},
		{"in the second document", "kind: ConfigMap\n---\nkind: Secret\nsops:\n  mac: x\n", true},
		{"JSON", `{"kind":"Secret","sops":{"mac":"x","version":"3.13.3"}}`, true},
		{"plain", "apiVersion: v1\nkind: ConfigMap\ndata:\n  sops: yes\n", false},
		{"a sops key that is no metadata", "kind: ConfigMap\nsops: plain\n", false},
		{"sops metadata without mac", "kind: ConfigMap\nsops:\n  version: 3\n", false},
		{"unparsable", "a: [\n", false},
	} {
		if got := encrypted([]byte(tc.content)); got != tc.want {
			t.Errorf("%s: encrypted = %v, want %v", tc.name, got, tc.want)
		}
	}
}
