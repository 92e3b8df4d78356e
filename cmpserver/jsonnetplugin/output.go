package jsonnetplugin

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// manifests turns what jsonnet printed (one JSON value) into the documents
// the plugin prints: an object is one manifest; an array's elements are
// manifests, nested arrays flattened, as Argo CD's native Jsonnet source reads
// them; null yields none. Anything else is an error naming where it is, since
// Argo CD would otherwise fail on it with a decoding error.
func manifests(out []byte) ([]json.RawMessage, error) {
	var v json.RawMessage
	if err := json.Unmarshal(out, &v); err != nil {
		return nil, fmt.Errorf("jsonnet printed no JSON value: %w", err)
	}
	var docs []json.RawMessage
	if err := collect(v, "the result", &docs); err != nil {
		return nil, err
	}
	return docs, nil
}

func collect(v json.RawMessage, where string, docs *[]json.RawMessage) error {
	v = bytes.TrimSpace(v)
	switch {
	case bytes.Equal(v, []byte("null")):
		return nil
	case len(v) > 0 && v[0] == '{':
		*docs = append(*docs, v)
		return nil
	case len(v) > 0 && v[0] == '[':
		var items []json.RawMessage
		if err := json.Unmarshal(v, &items); err != nil {
			return err
		}
		for i, item := range items {
			if err := collect(item, fmt.Sprintf("%s[%d]", where, i), docs); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%s is %s, want a Kubernetes object or an array of them", where, kind(v))
}

// kind names a JSON scalar's type for an error message.
func kind(v json.RawMessage) string {
	switch {
	case len(v) > 0 && v[0] == '"':
		return "a string"
	case bytes.Equal(v, []byte("true")) || bytes.Equal(v, []byte("false")):
		return "a boolean"
	}
	return "a number"
}
