package manifests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// A plugin printing one large JSON document cost about 8 × its size through
// the generic splitter (the decoder's stream buffer, json.Decoder's own
// buffer, the RawMessage copy, each grown by doubling). When the output is a
// file (the stdout spool) made only of JSON objects and arrays that the
// generic splitter decides is JSON (a leading '{' within its sniff: one that
// starts with an array is YAML to it) and decodes value by value, the values are found by a scan of their brackets instead, read once
// into one buffer sized to the largest, validated, and handed to emit from
// there: the largest document costs once its size, plus its copy in the
// response. Any other output takes the generic path, with nothing emitted yet.

// sizedReaderAt is the stdout spool (an io.SectionReader), or bytes.Reader.
type sizedReaderAt interface {
	io.ReaderAt
	Size() int64
}

// maxJSONFastValues bounds the values the fast path handles: beyond it the
// documents are small and the generic splitter's cost follows them closely.
const maxJSONFastValues = 1 << 16

// splitJSONValues emits every value of r, when r holds only JSON objects and
// arrays separated by JSON white space, and reports whether it did; false
// (with nothing emitted) leaves r to the generic splitter.
func splitJSONValues(r sizedReaderAt, emit func(doc []byte) error) (bool, error) {
	// The decoder reads a stream that starts with an array ("[0, 0,{}]") as
	// YAML and re-marshals it; the brackets alone do not say JSON.
	if isJSON, ok := decoderReadsJSON(r); !isJSON || !ok {
		return false, nil
	}
	var largest int64
	n := 0
	ok := jsonExtents(r, func(off, size int64) bool {
		n++
		largest = max(largest, size)
		return n <= maxJSONFastValues
	})
	if !ok || n == 0 {
		return false, nil
	}
	buf := make([]byte, largest)
	valid := jsonExtents(r, func(off, size int64) bool {
		doc := buf[:size]
		_, err := r.ReadAt(doc, off)
		return err == nil && json.Valid(doc)
	})
	if !valid {
		return false, nil
	}
	var emitErr error
	jsonExtents(r, func(off, size int64) bool {
		doc := buf[:size]
		if _, emitErr = r.ReadAt(doc, off); emitErr != nil {
			return false
		}
		emitErr = emit(bytes.TrimSpace(doc))
		return emitErr == nil
	})
	return true, emitErr
}

// jsonExtents calls each with the offset and length of every top-level value
// of r, found by their brackets (strings and escapes skipped), until each
// returns false. It reports whether r is wholly such values and each accepted
// all of them.
func jsonExtents(r sizedReaderAt, each func(off, size int64) bool) bool {
	br := bufio.NewReaderSize(io.NewSectionReader(r, 0, r.Size()), 64<<10)
	var off int64
	for {
		c, err := br.ReadByte()
		if errors.Is(err, io.EOF) {
			return true
		}
		if err != nil {
			return false
		}
		off++
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{', '[':
		default:
			return false // a scalar, or not JSON: the generic splitter decides
		}
		start := off - 1
		depth, inString, escaped := 1, false, false
		for depth > 0 {
			if c, err = br.ReadByte(); err != nil {
				return false
			}
			off++
			switch {
			case escaped:
				escaped = false
			case inString:
				switch c {
				case '\\':
					escaped = true
				case '"':
					inString = false
				}
			case c == '"':
				inString = true
			case c == '{' || c == '[':
				depth++
			case c == '}' || c == ']':
				depth--
			}
		}
		if !each(start, off-start) {
			return false
		}
	}
}
