package helmplugin

import (
	"encoding/json"
	"strconv"
	"strings"
)

// maxRefDepth bounds $ref chains so a self-referencing schema cannot loop.
const maxRefDepth = 16

// schemaNode is the part of a JSON schema needed to type a leaf.
type schemaNode struct {
	Type                 json.RawMessage        `json:"type"`
	Ref                  string                 `json:"$ref"`
	Properties           map[string]*schemaNode `json:"properties"`
	AdditionalProperties json.RawMessage        `json:"additionalProperties"`
	Items                json.RawMessage        `json:"items"`
}

// valuesSchema types leaves from a chart's values.schema.json.
type valuesSchema struct {
	root *schemaNode
	doc  map[string]any // the raw document, for $ref pointers
}

func parseSchema(data []byte) (*valuesSchema, error) {
	var root schemaNode
	if err := json.Unmarshal(data, &root); err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	return &valuesSchema{root: &root, doc: doc}, nil
}

// typeOf returns the leaf type the schema declares for path, and whether it declares
// one at all. A schema saying "string" forces a string even if the value looks like a
// number; a path the schema does not describe is typed from its value.
func (s *valuesSchema) typeOf(path setPath) (leafType, bool) {
	if s == nil {
		return 0, false
	}
	n := s.deref(s.root)
	for _, seg := range path {
		if n == nil {
			return 0, false
		}
		if seg.isIndex {
			n = s.deref(s.itemSchema(n, seg.index))
		} else {
			n = s.deref(s.propertySchema(n, seg.name))
		}
	}
	if n == nil {
		return 0, false
	}
	return declaredType(n.Type)
}

func (s *valuesSchema) propertySchema(n *schemaNode, name string) *schemaNode {
	if p, ok := n.Properties[name]; ok {
		return p
	}
	var extra schemaNode
	if json.Unmarshal(n.AdditionalProperties, &extra) == nil {
		return &extra
	}
	return nil
}

func (s *valuesSchema) itemSchema(n *schemaNode, i int) *schemaNode {
	var one schemaNode
	if json.Unmarshal(n.Items, &one) == nil {
		return &one
	}
	var tuple []*schemaNode
	if json.Unmarshal(n.Items, &tuple) == nil && i < len(tuple) {
		return tuple[i]
	}
	return nil
}

// deref follows local "#/..." references; remote ones are not fetched.
func (s *valuesSchema) deref(n *schemaNode) *schemaNode {
	for depth := 0; n != nil && n.Ref != "" && depth < maxRefDepth; depth++ {
		target, ok := s.pointer(n.Ref)
		if !ok {
			return nil
		}
		raw, err := json.Marshal(target)
		if err != nil {
			return nil
		}
		var next schemaNode
		if json.Unmarshal(raw, &next) != nil {
			return nil
		}
		n = &next
	}
	if n != nil && n.Ref != "" {
		return nil
	}
	return n
}

// pointer resolves a JSON pointer fragment (RFC 6901) inside the schema document.
func (s *valuesSchema) pointer(ref string) (any, bool) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	var cur any = s.doc
	for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			cur, ok = c[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			ok = err == nil && i >= 0 && i < len(c)
			if ok {
				cur = c[i]
			}
		default:
			ok = false
		}
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

// declaredType reads "type" as a string or a list; "null" in a list is ignored, and a
// list mixing kinds is a string as far as an input field goes.
func declaredType(raw json.RawMessage) (leafType, bool) {
	var types []string
	var one string
	if json.Unmarshal(raw, &one) == nil {
		types = []string{one}
	} else if json.Unmarshal(raw, &types) != nil {
		return 0, false
	}
	var number, boolean, other bool
	for _, t := range types {
		switch t {
		case "integer", "number":
			number = true
		case "boolean":
			boolean = true
		case "null":
		default:
			other = true
		}
	}
	switch {
	case number && !boolean && !other:
		return leafNumber, true
	case boolean && !number && !other:
		return leafBool, true
	case other && !number && !boolean:
		return leafString, true
	}
	return 0, false
}
