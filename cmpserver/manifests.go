package cmpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// splitManifests turns a generate command's stdout, a stream of YAML documents or
// JSON values, into one JSON string per object. Empty, comment-only and null
// documents are dropped; kind: List is left for the repo-server to flatten.
func splitManifests(out []byte) ([]string, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	var manifests []string
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("failed to unmarshal manifest: %w", err)
		}
		doc := bytes.TrimSpace(raw)
		if len(doc) == 0 || bytes.Equal(doc, []byte("null")) {
			continue
		}
		manifests = append(manifests, string(doc))
	}
	return manifests, nil
}
