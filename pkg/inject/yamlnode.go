package inject

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
)

// patchYAML applies each pod's JSON Patch to the document's YAML nodes at the
// pod's place, so keys keep their order and comments stay where they were:
// GitOps diffs of `cmp-injector inject` output show only what was added.
func patchYAML(doc []byte, patches []located) ([]byte, error) {
	var root yamlv3.Node
	if err := yamlv3.Unmarshal(doc, &root); err != nil {
		return nil, err
	}
	if root.Kind != yamlv3.DocumentNode || len(root.Content) != 1 {
		return nil, fmt.Errorf("not a single YAML document")
	}
	for _, p := range patches {
		path, err := walk(root.Content[0], p.at)
		if err != nil {
			return nil, err
		}
		if err := applyAdds(path, p.patch); err != nil {
			return nil, err
		}
	}
	var out bytes.Buffer
	enc := yamlv3.NewEncoder(&out)
	enc.SetIndent(2)
	if compactSequences(doc) {
		enc.CompactSeqIndent()
	}
	if err := enc.Encode(&root); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// applyAdds applies an RFC 6902 patch of add operations, the only kind the
// injector makes, to the pod at the end of pod (the nodes from the document's
// root down to it).
func applyAdds(pod []*yamlv3.Node, patch []byte) error {
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(patch, &ops); err != nil {
		return err
	}
	for _, op := range ops {
		if op.Op != "add" {
			return fmt.Errorf("patch operation %q: only add is applied offline", op.Op)
		}
		tokens, err := pointer(op.Path)
		if err != nil || len(tokens) == 0 {
			return fmt.Errorf("patch path %q: not a JSON pointer below the root", op.Path)
		}
		below, err := walk(pod[len(pod)-1], tokens[:len(tokens)-1])
		if err != nil {
			return fmt.Errorf("patch path %q: %w", op.Path, err)
		}
		value, err := jsonNode(op.Value)
		if err != nil {
			return err
		}
		// What is added is written in block style; a flow collection on its
		// way ("annotations: {a: b}") becomes block too, since a block cannot
		// stand inside a flow.
		path := append(append([]*yamlv3.Node{}, pod...), below[1:]...)
		for _, n := range path {
			n.Style &^= yamlv3.FlowStyle
		}
		if err := add(path[len(path)-1], tokens[len(tokens)-1], value); err != nil {
			return fmt.Errorf("patch path %q: %w", op.Path, err)
		}
	}
	return nil
}

// add sets key in a mapping or inserts at an index ("-": the end) of a
// sequence, as JSON Patch's add does.
func add(parent *yamlv3.Node, token string, value *yamlv3.Node) error {
	switch parent.Kind {
	case yamlv3.MappingNode:
		for i := 0; i+1 < len(parent.Content); i += 2 {
			if parent.Content[i].Value == token {
				parent.Content[i+1] = value
				return nil
			}
		}
		key := &yamlv3.Node{Kind: yamlv3.ScalarNode, Tag: "!!str", Value: token}
		parent.Content = append(parent.Content, key, value)
		return nil
	case yamlv3.SequenceNode:
		i := len(parent.Content)
		if token != "-" {
			n, err := strconv.Atoi(token)
			if err != nil || n < 0 || n > len(parent.Content) {
				return fmt.Errorf("index %q out of range", token)
			}
			i = n
		}
		parent.Content = append(parent.Content[:i], append([]*yamlv3.Node{value}, parent.Content[i:]...)...)
		return nil
	}
	return fmt.Errorf("cannot add %q to a scalar", token)
}

// walk follows reference tokens from node down mappings and sequences and
// returns the nodes it passed, node first.
func walk(node *yamlv3.Node, tokens []string) ([]*yamlv3.Node, error) {
	cur := node
	path := []*yamlv3.Node{cur}
	for _, t := range tokens {
		for cur.Kind == yamlv3.AliasNode {
			cur = cur.Alias
		}
		var next *yamlv3.Node
		switch cur.Kind {
		case yamlv3.MappingNode:
			for i := 0; i+1 < len(cur.Content); i += 2 {
				if cur.Content[i].Value == t {
					next = cur.Content[i+1]
				}
			}
		case yamlv3.SequenceNode:
			if i, err := strconv.Atoi(t); err == nil && i >= 0 && i < len(cur.Content) {
				next = cur.Content[i]
			}
		}
		if next == nil {
			return nil, fmt.Errorf("no %q", t)
		}
		cur = next
		path = append(path, cur)
	}
	return path, nil
}

// pointer splits a JSON Pointer (RFC 6901) into unescaped reference tokens.
func pointer(p string) ([]string, error) {
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("pointer %q does not start with /", p)
	}
	tokens := strings.Split(p[1:], "/")
	for i, t := range tokens {
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return tokens, nil
}

// jsonNode turns a JSON value into block-style YAML nodes in the JSON's key
// order (the API types' field order), quoting only what needs it.
func jsonNode(raw json.RawMessage) (*yamlv3.Node, error) {
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	n := doc.Content[0]
	plain(n)
	return n, nil
}

func plain(n *yamlv3.Node) {
	n.Style = 0
	for _, c := range n.Content {
		plain(c)
	}
}

// compactLine is a key opening a block followed by a sequence item at the
// key's own indentation ("containers:\n- name: x"), kubectl's style.
var compactLine = regexp.MustCompile(`(?m)^( *)[^ #\-\n][^\n]*:[ \t]*\n( *- )`)

// compactSequences reports whether the input writes sequences at their key's
// indentation; the output then does too, so untouched lines stay as they were.
func compactSequences(doc []byte) bool {
	for _, m := range compactLine.FindAllSubmatch(doc, -1) {
		if len(m[2]) == len(m[1])+2 {
			return true
		}
	}
	return false
}
