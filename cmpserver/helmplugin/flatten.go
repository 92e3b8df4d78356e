package helmplugin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// leafType is how a leaf value must be sent back for helm to see the same type.
type leafType int

const (
	leafString      leafType = iota // a string that --set keeps as a string
	leafTypedString                 // a string that --set would turn into a number, bool or null
	leafNumber
	leafBool
	// leafNull is a null; it is announced only where the schema gives it a type,
	// as an empty value that generate sends back as null.
	leafNull
)

// leaf is one scalar of a values tree, addressed by its --set path.
type leaf struct {
	path  setPath
	value string
	typ   leafType
}

// decodeValues parses a values document the way helm does (YAML to JSON), keeping
// numbers as their text so that nothing is rounded on the way to the announcement.
func decodeValues(data []byte) (map[string]any, error) {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	switch m := v.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return m, nil
	}
	return nil, fmt.Errorf("top level is a %T, not a map", v)
}

// flatten lists every scalar leaf under v, nulls included. Empty maps and lists have
// no value a --set could restore, and helm's --set ignores an empty key name, so
// neither is listed.
func flatten(v any, prefix setPath, out []leaf) []leaf {
	switch t := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			if k == "" {
				continue
			}
			out = flatten(t[k], appendSeg(prefix, segment{name: k}), out)
		}
	case []any:
		for i, item := range t {
			out = flatten(item, appendSeg(prefix, segment{index: i, isIndex: true}), out)
		}
	case nil:
		out = append(out, leaf{path: prefix, typ: leafNull})
	case json.Number:
		out = append(out, leaf{path: prefix, value: t.String(), typ: leafNumber})
	case bool:
		out = append(out, leaf{path: prefix, value: strconv.FormatBool(t), typ: leafBool})
	case string:
		typ := leafString
		if retypedBySet(t) {
			typ = leafTypedString
		}
		out = append(out, leaf{path: prefix, value: t, typ: typ})
	}
	return out
}

// appendSeg copies, so sibling paths never share a backing array.
func appendSeg(p setPath, s segment) setPath {
	out := make(setPath, len(p), len(p)+1)
	copy(out, p)
	return append(out, s)
}

// retypedBySet mirrors the typing helm's --set applies to a plain value: true, false
// and null in any case, 0, and decimal integers without a leading zero.
func retypedBySet(s string) bool {
	if strings.EqualFold(s, "true") || strings.EqualFold(s, "false") || strings.EqualFold(s, "null") || s == "0" {
		return true
	}
	if s == "" || s[0] == '0' {
		return false
	}
	_, err := strconv.ParseInt(s, 10, 64)
	return err == nil
}

// mergeValues overlays src onto dst as helm merges values files: maps merge key by
// key, anything else replaces, and a null removes the key.
func mergeValues(dst, src map[string]any) map[string]any {
	for k, v := range src {
		if v == nil {
			delete(dst, k)
			continue
		}
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				dst[k] = mergeValues(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
	return dst
}
