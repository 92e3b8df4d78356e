package inject

import (
	"bytes"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The hand-written patch encoding is json.Marshal's, for every kind of value
// apply adds (HTML-sensitive characters included).
func TestPatchMarshalIsJSONMarshal(t *testing.T) {
	raw := json.RawMessage(`{"name":"a\u003cb","value":"x\u0026y"}`)
	var p patch
	p.add("/spec/volumes", []json.RawMessage{raw, raw})
	p.add("/spec/containers/-", raw)
	p.add("/spec/containers/0/env", []corev1.EnvVar{{Name: "A", Value: "<&>"}})
	p.add("/metadata/annotations", map[string]string{"b": "2", "a": "<1>"})
	p.add("/metadata/annotations/cmp-injector.io~1status", `{"plugins":["x"]}`)
	// Strings written directly and those that go through json.Marshal.
	for _, s := range []string{"", "plain text ~0~1", "line\nbreak", `quote " and \ backslash`, "<html>&amp;", "\u00e9t\u00e9", "\x7f\x01", "\u2028", "bad \xff utf-8"} {
		p.add("/metadata/annotations/"+escapePointer(s), s)
	}
	want, err := json.Marshal([]patchOp(p))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.marshal(); !bytes.Equal(got, want) {
		t.Errorf("patch bytes\n got %s\nwant %s", got, want)
	}
}
