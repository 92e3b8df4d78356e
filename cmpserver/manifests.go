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

// manifestSink receives the documents of a generate output as JSON; doc is
// only valid during add.
type manifestSink interface {
	add(doc []byte) error
}

// sinkFunc is a function as a manifestSink.
type sinkFunc func(doc []byte) error

func (f sinkFunc) add(doc []byte) error { return f(doc) }

// owningSink is a sink that can keep a document the splitter allocated for
// it alone instead of copying it (the response, codec.go).
type owningSink interface {
	adopt(doc []byte)
}

// splitManifestStream reads a generate command's stdout, a stream of YAML
// documents or JSON values, and hands sink each object as JSON. Empty,
// comment-only and null documents are dropped; kind: List is left for the
// repo-server to flatten. The decoder holds one document at a time, so memory
// follows the largest document, not the output; doc is only valid during emit.
func splitManifestStream(r io.Reader, sink manifestSink) error {
	if ra, ok := r.(sizedReaderAt); ok {
		if done, err := splitJSONValues(ra, sink.add); done {
			return err
		}
		if done, err := splitYAMLDocuments(ra, sink); done {
			return err
		}
		// The generic path reads from the start.
		r = io.NewSectionReader(ra, 0, ra.Size())
	}
	return splitDecoded(r, sink.add)
}

// splitDecoded is the generic path: Kubernetes' YAML-or-JSON decoder, whose
// answers the two fast paths (jsonstream.go, yamlstream.go) give byte for byte.
func splitDecoded(r io.Reader, emit func(doc []byte) error) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReaderSize(r, 64<<10), yamlSniff)
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
	err := splitManifestStream(bytes.NewReader(out), sinkFunc(func(doc []byte) error {
		manifests = append(manifests, string(doc))
		return nil
	}))
	return manifests, err
}
