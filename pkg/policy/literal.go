package policy

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// The API server types a policy's CEL against the object's schema: a map
// literal mixing a string and a list (a container) does not compile, but a
// literal naming its type path (Object.spec.containers{name: …}) does, with
// each nested object typed by its own path. So what the webhook adds is
// written as typed literals, from the JSON of the very objects the webhook
// would add (pkg/inject's parts), with the parts that depend on the pod
// replaced by expressions.

// literal writes JSON-shaped values as typed CEL literals.
type literal struct {
	// fields replaces a field, by its path below the literal's root
	// ("securityContext.runAsUser"), with an expression.
	fields map[string]field
	// strings replaces a string value (a sentinel the part was built with)
	// with an expression.
	strings map[string]string
	// ints does the same for whole numbers (a sentinel UID).
	ints map[int64]field
	// cond chooses between the two variants of pair.
	cond string
}

// field is an expression for a field; optional ones are written ?name: and
// their expression is an optional value (the field is then absent when it
// is optional.none()).
type field struct {
	expr     string
	optional bool
}

// of is v as a literal of CEL type typ.
func (l *literal) of(v any, typ string) string {
	return l.write(v, typ, "")
}

func (l *literal) write(v any, typ, path string) string {
	switch x := v.(type) {
	case map[string]any:
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(x)) {
			parts = append(parts, l.member(k, x[k], typ, path))
		}
		return typ + "{" + strings.Join(parts, ", ") + "}"
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = l.write(e, typ, path)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case string:
		if e, ok := l.strings[x]; ok {
			return e
		}
		return quote(x)
	case float64:
		return strconv.FormatInt(int64(x), 10)
	case bool:
		return strconv.FormatBool(x)
	}
	// encoding/json decodes only the kinds above (nil fields are omitted by
	// the API types' omitempty).
	panic(fmt.Sprintf("policy: no CEL literal for %T", v))
}

// member writes one field k: v of an object of type typ at path.
func (l *literal) member(k string, v any, typ, path string) string {
	p := join(path, k)
	if f, ok := l.fields[p]; ok {
		return f.write(k)
	}
	if n, ok := v.(float64); ok {
		if f, ok := l.ints[int64(n)]; ok {
			return f.write(k)
		}
	}
	return k + ": " + l.write(v, typ+"."+k, p)
}

func (f field) write(name string) string {
	if f.optional {
		return "?" + name + ": " + f.expr
	}
	return name + ": " + f.expr
}

// pair writes a and b, two variants of one object, as one literal that is a
// where l.cond holds and b where it does not: equal parts once, differing
// fields as conditionals, so the expression stays about one object long.
func (l *literal) pair(a, b any, typ string) string {
	return l.writePair(a, b, typ, "")
}

func (l *literal) writePair(a, b any, typ, path string) string {
	if reflect.DeepEqual(a, b) {
		return l.write(a, typ, path)
	}
	ma, okA := a.(map[string]any)
	mb, okB := b.(map[string]any)
	if !okA || !okB {
		return "(" + l.cond + " ? " + l.write(a, typ, path) + " : " + l.write(b, typ, path) + ")"
	}
	keys := slices.Sorted(maps.Keys(ma))
	for _, k := range slices.Sorted(maps.Keys(mb)) {
		if _, ok := ma[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		va, inA := ma[k]
		vb, inB := mb[k]
		p, t := join(path, k), typ+"."+k
		switch {
		case inA && inB && reflect.DeepEqual(va, vb):
			parts = append(parts, l.member(k, va, typ, path))
		case inA && inB:
			if f, ok := l.fields[p]; ok {
				parts = append(parts, f.write(k))
			} else {
				parts = append(parts, k+": "+l.writePair(va, vb, t, p))
			}
		case inA:
			parts = append(parts, "?"+k+": ("+l.cond+" ? optional.of("+l.write(va, t, p)+") : optional.none())")
		default:
			parts = append(parts, "?"+k+": ("+l.cond+" ? optional.none() : optional.of("+l.write(vb, t, p)+"))")
		}
	}
	return typ + "{" + strings.Join(parts, ", ") + "}"
}

// jsonOf is v as encoding/json decodes it into an interface: the shape the
// literal writer reads.
func jsonOf(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // API types always marshal
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

// quote is s as a CEL string literal. Go's quoted form is one: CEL reads the
// same escapes (\n, \", \xNN, \uNNNN).
func quote(s string) string { return strconv.Quote(s) }

// strList is ss as a CEL list of strings.
func strList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}
