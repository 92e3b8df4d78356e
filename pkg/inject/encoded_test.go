package inject

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// A container's cache key is its spec, so a spec must hold every input of
// what it builds, and each of its fields must be one. This holds the second
// half for every field, and makes a new field name its variant: a spec that
// differs only there must build another container, and a cache that already
// holds the base must answer the variant with the variant's own JSON.
func TestSpecFieldsAreInputs(t *testing.T) {
	cat := testCat(t)
	bases := []containerSpec{
		copySpec{uid: 999},
		sidecarSpec{plugin: "helm", image: "alpine/helm:3.16.2", server: keys.PluginServerPath, uid: 999},
		socketsSpec{plugins: "helm", uid: 999},
	}
	// variants["type.field"] differs from its type's base in that field only.
	variants := map[string]containerSpec{
		"copySpec.uid":        copySpec{uid: 1000},
		"sidecarSpec.plugin":  sidecarSpec{plugin: "kustomize", image: "alpine/helm:3.16.2", server: keys.PluginServerPath, uid: 999},
		"sidecarSpec.image":   sidecarSpec{plugin: "helm", image: "alpine/helm:3.17.0", server: keys.PluginServerPath, uid: 999},
		"sidecarSpec.server":  sidecarSpec{plugin: "helm", image: "alpine/helm:3.16.2", server: keys.CopyServerBinary, uid: 999},
		"sidecarSpec.uid":     sidecarSpec{plugin: "helm", image: "alpine/helm:3.16.2", server: keys.PluginServerPath, uid: 1000},
		"sidecarSpec.native":  sidecarSpec{plugin: "helm", image: "alpine/helm:3.16.2", server: keys.PluginServerPath, uid: 999, native: true},
		"socketsSpec.plugins": socketsSpec{plugins: "helm,kustomize", uid: 999},
		"socketsSpec.uid":     socketsSpec{plugins: "helm", uid: 1000},
		"socketsSpec.native":  socketsSpec{plugins: "helm", uid: 999, native: true},
	}
	enc := NewEncodings().forCatalog(cat)
	for _, base := range bases {
		bt := reflect.TypeOf(base)
		baseJSON := enc.containerJSON(base, cat)
		for i := range bt.NumField() {
			name := bt.Name() + "." + bt.Field(i).Name
			v, ok := variants[name]
			if !ok {
				t.Errorf("%s has no variant here: add one that differs from the base in that field only", name)
				continue
			}
			if other := differingFields(base, v); len(other) != 1 || other[0] != bt.Field(i).Name {
				t.Errorf("the variant of %s differs from the base in %v", name, other)
				continue
			}
			fresh, err := json.Marshal(v.container(cat))
			if err != nil {
				t.Fatal(err)
			}
			if string(fresh) == string(baseJSON) {
				t.Errorf("%s does not change the container built: it is not an input, remove it from the spec", name)
			}
			if got := enc.containerJSON(v, cat); string(got) != string(fresh) {
				t.Errorf("%s: the cache answers the variant with other JSON than it builds", name)
			}
		}
	}
}

// differingFields names the fields in which two values of one struct type differ.
func differingFields(a, b any) []string {
	av, bv := reflect.ValueOf(a), reflect.ValueOf(b)
	var out []string
	for i := range av.NumField() {
		if fmt.Sprint(av.Field(i)) != fmt.Sprint(bv.Field(i)) {
			out = append(out, av.Type().Field(i).Name)
		}
	}
	return out
}

// Each catalog snapshot has its own cache: a reload must never be answered
// with the JSON built from the catalog before it.
func TestEncodingsFollowTheSnapshot(t *testing.T) {
	e := NewEncodings()
	a, b := testCat(t), testCat(t)
	b.Defaults.CopyImage = "cmp-server:2"
	spec := copySpec{uid: 999}
	first := e.forCatalog(a).containerJSON(spec, a)
	second := e.forCatalog(b).containerJSON(spec, b)
	if string(first) == string(second) {
		t.Fatalf("the copy container did not follow the new snapshot's image: %s", second)
	}
	var nilEnc *Encodings
	if nilEnc.forCatalog(a) != nil {
		t.Fatal("a nil Encodings must keep nothing")
	}
}
