package pluginconfig

import (
	"bytes"
	"cmp"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	yamlv3 "go.yaml.in/yaml/v3"
)

// yaml11Booleans are the plain words go-yaml v2 (YAML 1.1, what
// sigs.k8s.io/yaml parses with) reads as booleans and YAML 1.2 reads as
// strings. true and false are not here: they are booleans in both, and a
// reader who wrote them unquoted where a string belongs meant a boolean.
var yaml11Booleans = map[string]bool{
	"y": true, "Y": true, "yes": true, "Yes": true, "YES": true,
	"n": true, "N": true, "no": true, "No": true, "NO": true,
	"on": true, "On": true, "ON": true, "off": true, "Off": true, "OFF": true,
}

// QuoteYAML11Words returns data with every plain y, N, yes, no, on, off (and
// their case forms) quoted where target, the Go type the document decodes
// into, has a string. An env var named N, a parameter named on, a command
// argument yes then come through as that text; unquoted, YAML 1.1 made them
// booleans and decoding failed with "cannot unmarshal bool into ... string".
// (sigs.k8s.io/yaml's own typed Unmarshal is no answer: it turns such a
// boolean into "true" or "false", silently.) Where target has a bool, a map
// key or anything else, the word is left to YAML 1.1. Only quotes are
// inserted, so every other byte, and what go-yaml v2 makes of it, stays the
// same; data that go-yaml v3 cannot parse is returned as it is, for the
// caller's parser to report. A json.RawMessage of target is walked as rawAs
// (the catalog's inline plugin.yaml is a Plugin); nil: left alone.
func QuoteYAML11Words(data []byte, target, rawAs reflect.Type) []byte {
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 {
		return data
	}
	w := wordFinder{rawAs: rawAs}
	w.find(doc.Content[0], target, 0)
	at := w.at
	if len(at) == 0 {
		return data
	}
	// From the last: an insertion moves only what follows it on its line.
	slices.SortFunc(at, func(a, b *yamlv3.Node) int {
		if a.Line != b.Line {
			return cmp.Compare(b.Line, a.Line)
		}
		return cmp.Compare(b.Column, a.Column)
	})
	lines := bytes.SplitAfter(data, []byte("\n"))
	for _, n := range at {
		if n.Line < 1 || n.Line > len(lines) {
			continue
		}
		line := lines[n.Line-1]
		// Column counts characters from 1; find its byte offset.
		off := 0
		for col := 1; col < n.Column && off < len(line); col++ {
			_, size := utf8.DecodeRune(line[off:])
			off += size
		}
		// Only where the line holds the word itself: otherwise leave the
		// byte alone and let decoding fail as before, never guess.
		if !bytes.HasPrefix(line[off:], []byte(n.Value)) {
			continue
		}
		quoted := make([]byte, 0, len(line)+2)
		quoted = append(quoted, line[:off]...)
		quoted = append(quoted, '"')
		quoted = append(quoted, n.Value...)
		quoted = append(quoted, '"')
		quoted = append(quoted, line[off+len(n.Value):]...)
		lines[n.Line-1] = quoted
	}
	return bytes.Join(lines, nil)
}

// maxWordDepth bounds the walk on a hostile, deeply nested document (go-yaml
// bounds its own nesting too).
const maxWordDepth = 100

var (
	jsonUnmarshaler = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
	rawMessage      = reflect.TypeOf(json.RawMessage{})
)

// wordFinder collects the nodes QuoteYAML11Words quotes.
type wordFinder struct {
	rawAs reflect.Type
	at    []*yamlv3.Node
}

// find appends the plain YAML 1.1 boolean words of n that decode into a
// string of t.
func (w *wordFinder) find(n *yamlv3.Node, t reflect.Type, depth int) {
	if depth > maxWordDepth || t == nil {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessage {
		t = w.rawAs
		if t == nil {
			return
		}
	}
	// A type with its own JSON decoding (a Quantity, an IntOrString) says
	// itself what it takes.
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		return
	}
	switch n.Kind {
	case yamlv3.ScalarNode:
		if t.Kind() == reflect.String && n.Style == 0 && n.Tag == "!!str" && yaml11Booleans[n.Value] {
			w.at = append(w.at, n)
		}
	case yamlv3.SequenceNode:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for _, item := range n.Content {
				w.find(item, t.Elem(), depth+1)
			}
		}
	case yamlv3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			switch t.Kind() {
			case reflect.Map:
				w.find(v, t.Elem(), depth+1)
			case reflect.Struct:
				w.find(v, fieldType(t, k.Value), depth+1)
			}
		}
	}
}

// fieldType is the type of t's field that encoding/json decodes key into
// (its JSON name, exact or in another case; embedded structs' fields
// included), nil when none.
func fieldType(t reflect.Type, key string) reflect.Type {
	var folded reflect.Type
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		if name == "" && f.Anonymous {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				if ft := fieldType(et, key); ft != nil {
					return ft
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		if name == key {
			return f.Type
		}
		if folded == nil && strings.EqualFold(name, key) {
			folded = f.Type
		}
	}
	return folded
}
