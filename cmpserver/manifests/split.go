// Package manifests splits a generate command's output, a stream of YAML
// documents or JSON values, into one JSON document per object, as Argo CD's
// server does with Kubernetes' YAML-or-JSON decoder, without holding a large
// document several times (jsonstream.go, yamlstream.go).
package manifests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Sink receives the documents of a generate output as JSON; doc is only
// valid during Add.
type Sink interface {
	Add(doc []byte) error
}

// SinkFunc is a function as a Sink.
type SinkFunc func(doc []byte) error

// Add calls f.
func (f SinkFunc) Add(doc []byte) error { return f(doc) }

// documentOwner is a Sink that can keep a document the splitter allocated for it
// alone instead of copying it (the gRPC response); Adopt reports whether it
// did, and the document is then the sink's. A sink that declines gets Add.
type documentOwner interface {
	Adopt(doc []byte) bool
}

// Split reads a generate command's stdout, a stream of YAML
// documents or JSON values, and hands sink each object as JSON. Empty,
// comment-only and null documents are dropped; kind: List is left for the
// repo-server to flatten. The decoder holds one document at a time, so memory
// follows the largest document, not the output; doc is only valid during emit.
func Split(r io.Reader, sink Sink) error {
	if ra, ok := r.(sizedReaderAt); ok {
		if done, err := splitJSONValues(ra, sink.Add); done {
			return err
		}
		if done, err := splitYAMLDocuments(ra, sink); done {
			return err
		}
		// The generic path reads from the start. When the decoder will
		// read YAML, every YAML document is held to the fast path's budget
		// first (budget.go).
		if decoderReadsYAML(ra) {
			if err := checkYAMLTokens(ra, maxYAMLDocumentTokens); err != nil {
				return err
			}
		}
		r = io.NewSectionReader(ra, 0, ra.Size())
	}
	return splitDecoded(r, sink.Add)
}

// decoderReadsJSON reports whether the generic path's decoder reads r as a
// stream of JSON values: a '{' after white space within its first yamlSniff
// bytes. Anything else, a stream that starts with a JSON array included, it
// reads as YAML and re-marshals (white space dropped, keys sorted, numbers as
// go-yaml reads them), so each fast path takes only the output the decoder
// would read its way; ok is false when r cannot be read (the decoder then
// gives the error).
func decoderReadsJSON(r sizedReaderAt) (isJSON, ok bool) {
	head := make([]byte, min(r.Size(), yamlSniff))
	if _, err := r.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return false, false
	}
	return utilyaml.IsJSONBuffer(head), true
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

// decoderReadsYAML reports whether Kubernetes' decoder will read some of r
// as YAML: it reads JSON values while they decode, and once it has two it
// never switches (a later error is the answer); a failure before that
// switches it to YAML.
func decoderReadsYAML(r sizedReaderAt) bool {
	dec := json.NewDecoder(bufio.NewReaderSize(io.NewSectionReader(r, 0, r.Size()), 64<<10))
	for range 2 {
		var skip struct{}
		if err := dec.Decode(&skip); errors.Is(err, io.EOF) {
			return false
		} else if err != nil {
			var typeErr *json.UnmarshalTypeError
			if !errors.As(err, &typeErr) {
				return true
			}
		}
	}
	return false
}
