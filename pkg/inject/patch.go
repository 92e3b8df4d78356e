package inject

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// patchOp is one RFC 6902 operation. The injector only ever adds.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// escapePointer escapes one JSON Pointer reference token (RFC 6901): "~" first,
// then "/", since annotation keys contain slashes.
func escapePointer(token string) string {
	if !strings.ContainsAny(token, "~/") {
		return token
	}
	return strings.ReplaceAll(strings.ReplaceAll(token, "~", "~0"), "/", "~1")
}

// patch accumulates add operations against the pod as it was received.
type patch []patchOp

func (p *patch) add(path string, value any) {
	*p = append(*p, patchOp{Op: "add", Path: path, Value: value})
}

// appendAll adds items to the array at path. An absent or empty array is
// written whole, because "/-" needs an existing array.
func appendAll[T any](p *patch, path string, existing int, items []T) {
	if len(items) == 0 {
		return
	}
	if existing == 0 {
		p.add(path, items)
		return
	}
	for i := range items {
		p.add(path+"/-", items[i])
	}
}

// addAnnotations sets keys in metadata.annotations, creating the map when the
// pod has none; a key in encoded has its value's JSON there already.
func addAnnotations(p *patch, hasMap bool, kv map[string]string, encoded map[string]json.RawMessage, order []string) {
	if !hasMap {
		p.add("/metadata/annotations", kv)
		return
	}
	for _, k := range order {
		if raw, ok := encoded[k]; ok {
			p.add("/metadata/annotations/"+escapePointer(k), raw)
			continue
		}
		p.add("/metadata/annotations/"+escapePointer(k), kv[k])
	}
}

func indexPath(base string, i int) string { return base + "/" + strconv.Itoa(i) }

func (p patch) marshal() []byte {
	// Written by hand around the values: most are JSON kept per catalog
	// snapshot (encoded.go), which json.Marshal would scan and compact again.
	// The bytes are json.Marshal's (the golden tests compare them).
	var b bytes.Buffer
	// One allocation: the values' lengths plus room for the operations.
	n := 2
	for _, op := range p {
		n += len(op.Path) + 64
		switch v := op.Value.(type) {
		case json.RawMessage:
			n += len(v)
		case []json.RawMessage:
			for _, raw := range v {
				n += len(raw) + 1
			}
		case string:
			n += len(v) + len(v)/8
		default:
			n += 256
		}
	}
	b.Grow(n)
	b.WriteByte('[')
	for i, op := range p {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"op":`)
		writeString(&b, op.Op)
		b.WriteString(`,"path":`)
		writeString(&b, op.Path)
		b.WriteString(`,"value":`)
		switch v := op.Value.(type) {
		case json.RawMessage:
			b.Write(v)
		case string:
			writeString(&b, v)
		case []json.RawMessage:
			b.WriteByte('[')
			for j, raw := range v {
				if j > 0 {
					b.WriteByte(',')
				}
				b.Write(raw)
			}
			b.WriteByte(']')
		default:
			writeJSON(&b, v)
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return b.Bytes()
}

// writeString appends s as json.Marshal writes it.
func writeString(b *bytes.Buffer, s string) {
	b.Write(appendJSONString(b.AvailableBuffer(), s))
}

// appendJSONString appends s as json.Marshal writes it: between quotes as it
// is when it holds only printable ASCII that encoding/json does not escape
// (operations, paths, names), else through json.Marshal.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			out, _ := json.Marshal(s) // a string always marshals
			return append(dst, out...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// writeJSON appends v's json.Marshal form.
func writeJSON(b *bytes.Buffer, v any) {
	out, err := json.Marshal(v)
	if err != nil {
		// Every value is a Kubernetes API type or a string map: it always marshals.
		panic(err)
	}
	b.Write(out)
}
