package policy

import "testing"

func TestLiteral(t *testing.T) {
	v := map[string]any{
		"name":            "cmp-helm",
		"image":           "@image",
		"args":            []any{"serve", "a\"b\n"},
		"ok":              true,
		"securityContext": map[string]any{"runAsUser": float64(7), "runAsNonRoot": true},
	}
	l := &literal{strings: map[string]string{"@image": "variables.image"}, ints: map[int64]field{7: {expr: "optional.of(variables.uid)", optional: true}},
		fields: map[string]field{"ok": {expr: "variables.ok"}}}
	want := `T{args: ["serve", "a\"b\n"], image: variables.image, name: "cmp-helm", ok: variables.ok, securityContext: T.securityContext{runAsNonRoot: true, ?runAsUser: optional.of(variables.uid)}}`
	if got := l.of(v, "T"); got != want {
		t.Errorf("of:\n got %s\nwant %s", got, want)
	}
}

func TestLiteralPair(t *testing.T) {
	a := map[string]any{"command": []any{"/copied"}, "mounts": []any{"x"}, "same": "s", "onlyA": "a"}
	b := map[string]any{"command": []any{"/own"}, "mounts": []any{"x"}, "same": "s", "onlyB": "b"}
	l := &literal{cond: "c"}
	want := `T{command: (c ? ["/copied"] : ["/own"]), mounts: ["x"], ?onlyA: (c ? optional.of("a") : optional.none()), ?onlyB: (c ? optional.none() : optional.of("b")), same: "s"}`
	if got := l.pair(a, b, "T"); got != want {
		t.Errorf("pair:\n got %s\nwant %s", got, want)
	}
	if got := l.pair(a, a, "T"); got != l.of(a, "T") {
		t.Errorf("pair of equal variants %s, want the literal of one", got)
	}
}
