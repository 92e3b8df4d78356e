package cmpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// splitManifestStream reads a generate command's stdout, a stream of YAML
// documents or JSON values, and calls emit with each object as JSON. Empty,
// comment-only and null documents are dropped; kind: List is left for the
// repo-server to flatten. The decoder holds one document at a time, so memory
// follows the largest document, not the output; doc is only valid during emit.
func splitManifestStream(r io.Reader, emit func(doc []byte) error) error {
	if ra, ok := r.(sizedReaderAt); ok {
		if done, err := splitJSONValues(ra, emit); done {
			return err
		}
		// The generic path reads from the start.
		r = io.NewSectionReader(ra, 0, ra.Size())
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReaderSize(r, 64<<10), 4096)
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("failed to unmarshal manifest: %w", err)
		}
		doc := bytes.TrimSpace(raw)
		if len(doc) == 0 || bytes.Equal(doc, []byte("null")) {
			continue
		}
		if err := emit(doc); err != nil {
			return err
		}
	}
}

// splitManifests is splitManifestStream collected into strings.
func splitManifests(out []byte) ([]string, error) {
	var manifests []string
	err := splitManifestStream(bytes.NewReader(out), func(doc []byte) error {
		manifests = append(manifests, string(doc))
		return nil
	})
	return manifests, err
}
