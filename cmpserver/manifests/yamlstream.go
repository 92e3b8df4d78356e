package manifests

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	yamlv2 "go.yaml.in/yaml/v2"
)

// One large YAML document cost about 26 × its size through Kubernetes'
// YAML-or-JSON decoder: the document buffer and each line grown by doubling,
// go-yaml's tree, a second tree with string keys, json.Marshal's growing
// buffer and its copy, json.Decoder's buffer and the RawMessage copy. When the
// output is a file (the stdout spool) that the decoder would read as YAML from
// its first byte, the documents are cut here instead, each streamed from the
// file (never held whole as text) into the same go-yaml (v2, YAML 1.1) the
// decoder uses, and written as JSON straight into a buffer of the exact size
// of the result: the same bytes, in the same order, with the same errors.
// Output that starts like JSON keeps the decoder (or jsonstream.go).
//
// What stays is go-yaml's own cost, the floor of any path that gives its
// answer: while a document is parsed it exists as go-yaml's node tree and as
// the tree of values decoded from it (the two share their strings, about
// once the document's size), and the scanner builds each scalar by appending
// one character at a time, which allocates about 3 × the scalars' size in
// short-lived buffers. Then the JSON (once) and its copy in the response
// (once) are held together for a moment.

// yamlSniff is how far the decoder looks for a leading '{' (the size passed
// to NewYAMLOrJSONDecoder).
const yamlSniff = 4096

// splitYAMLDocuments emits every document of r when the decoder would read r
// as YAML from the start, and reports whether it did; false (with nothing
// emitted) leaves r to the decoder.
func splitYAMLDocuments(r sizedReaderAt, sink Sink) (bool, error) {
	if isJSON, ok := decoderReadsJSON(r); isJSON || !ok {
		return false, nil
	}
	text := &documentReader{br: bufio.NewReaderSize(nil, 16<<10)}
	doc := 0
	err := yamlDocumentExtents(r, func(start, end int64) error {
		doc++
		// Counted before go-yaml holds it (budget.go).
		text.reset(r, start, end)
		if n, err := countYAMLTokens(text, maxYAMLDocumentTokens); err != nil {
			return err
		} else if n > maxYAMLDocumentTokens {
			return errTooManyTokens(doc, start, end, maxYAMLDocumentTokens)
		}
		text.reset(r, start, end)
		out, err := yamlDocumentJSON(text)
		if err != nil {
			// The decoder's words: its YAMLSyntaxError around
			// sigs.k8s.io/yaml's, around go-yaml's.
			return fmt.Errorf("failed to unmarshal manifest: error converting YAML to JSON: %w", err)
		}
		if out == nil {
			return nil // empty, comments only, or null
		}
		// out is this document's alone: a sink that keeps it (a large
		// document, in the response) never holds it twice.
		if o, ok := sink.(documentOwner); ok && o.Adopt(out) {
			return nil
		}
		return sink.Add(out)
	})
	return true, err
}

// yamlDocumentExtents finds the documents of r as the decoder's line reader
// does and calls each with the raw extent of every document. A document is
// the lines up to a separator line (a line starting with "---" followed by
// nothing but white space or a comment), the separator included when it is
// the document's first line; a line starting with "---" followed by anything
// else is an error, after the documents before it.
func yamlDocumentExtents(r sizedReaderAt, each func(start, end int64) error) error {
	br := bufio.NewReaderSize(io.NewSectionReader(r, 0, r.Size()), 64<<10)
	var off int64
	docStart, docEnd := int64(0), int64(-1) // docEnd < 0: no line yet
	for {
		lineStart := off
		lead, _ := br.Peek(3) // fewer than 3 bytes left: not a separator
		separator := len(lead) == 3 && string(lead) == "---"
		n, err := skipLine(br)
		off += n
		if n == 0 && errors.Is(err, io.EOF) {
			break
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("failed to unmarshal manifest: %w", err)
		}
		if separator {
			if err := checkSeparator(r, lineStart, off); err != nil {
				return err
			}
			// A separator ends a document and is dropped; before any
			// line it is the first line of the next one.
			if docEnd >= 0 {
				if err := each(docStart, docEnd); err != nil {
					return err
				}
				docStart, docEnd = off, -1
				continue
			}
		}
		docEnd = off
	}
	if docEnd >= 0 {
		return each(docStart, docEnd)
	}
	return nil
}

// skipLine consumes one line, its '\n' included, and returns its length.
func skipLine(br *bufio.Reader) (int64, error) {
	var n int64
	for {
		chunk, err := br.ReadSlice('\n')
		n += int64(len(chunk))
		if !errors.Is(err, bufio.ErrBufferFull) {
			return n, err
		}
	}
}

// checkSeparator fails a line starting with "---" that the decoder does not
// take as a separator, with its message.
func checkSeparator(r sizedReaderAt, start, end int64) error {
	line := make([]byte, end-start)
	if _, err := r.ReadAt(line, start); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("failed to unmarshal manifest: %w", err)
	}
	rest := strings.TrimSpace(string(line[3:]))
	if len(rest) > 0 && rest[0] != '#' {
		return fmt.Errorf("failed to unmarshal manifest: invalid Yaml document separator: %s", rest)
	}
	return nil
}

// documentReader reads [start, end) of the output as the decoder's line
// reader hands it over: each "\r\n" line end made "\n", and a last line
// without one given a '\n'. go-yaml reads it in small chunks, so the text
// of a document is never held whole.
type documentReader struct {
	br    *bufio.Reader
	last  byte
	ended bool
}

// reset points d at [start, end) of r.
func (d *documentReader) reset(r sizedReaderAt, start, end int64) {
	d.br.Reset(io.NewSectionReader(r, start, end-start))
	d.last, d.ended = 0, false
}

func (d *documentReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c, err := d.br.ReadByte()
		if errors.Is(err, io.EOF) {
			if !d.ended && d.last != '\n' {
				p[n] = '\n'
				n++
			}
			d.ended = true
			if n == 0 {
				return 0, io.EOF
			}
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("failed to unmarshal manifest: %w", err)
		}
		if c == '\r' {
			if next, err := d.br.Peek(1); err == nil && next[0] == '\n' {
				continue
			}
		}
		p[n] = c
		d.last = c
		n++
	}
	return n, nil
}

// yamlDocumentJSON is sigs.k8s.io/yaml's YAMLToJSON of one document, nil for
// JSON null, written into one buffer of the result's size: go-yaml's values,
// their keys made strings as YAMLToJSON makes them, marshalled as
// encoding/json marshals them (keys sorted, HTML characters escaped).
func yamlDocumentJSON(text io.Reader) ([]byte, error) {
	var v any
	// A decoder, not Unmarshal, only so that the text is read in chunks:
	// both run the same parser over the first document of the text, which
	// here is never empty. No document at all (io.EOF) is Unmarshal's nil.
	if err := yamlv2.NewDecoder(text).Decode(&v); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if v == nil {
		return nil, nil
	}
	v, err := jsonable(v)
	if err != nil {
		return nil, err
	}
	var count jsonWriter
	if err := count.value(v); err != nil {
		return nil, err
	}
	out := jsonWriter{buf: make([]byte, 0, count.n)}
	if err := out.value(v); err != nil {
		return nil, err
	}
	return out.buf, nil
}

// member is one entry of an object, its key already a string.
type member struct {
	key   string
	value any
}

// object is a YAML mapping with its keys made strings, sorted as
// encoding/json sorts a map's keys.
type object []member

// jsonable makes go-yaml's mappings objects. Keys that are not strings
// become strings as sigs.k8s.io/yaml makes them; a key of another type (null,
// a sequence) is its error. Two keys that become the same string are one key
// in YAMLToJSON's map, which keeps one of them at random; here the last in
// sorted order wins (the fuzz target skips such input).
func jsonable(v any) (any, error) {
	switch v := v.(type) {
	case map[any]any:
		o := make(object, 0, len(v))
		for k, item := range v {
			key, err := jsonKey(k, item)
			if err != nil {
				return nil, err
			}
			if item, err = jsonable(item); err != nil {
				return nil, err
			}
			o = append(o, member{key, item})
		}
		slices.SortStableFunc(o, func(a, b member) int { return strings.Compare(a.key, b.key) })
		return slices.CompactFunc(o, func(a, b member) bool { return a.key == b.key }), nil
	case []any:
		out := make([]any, len(v))
		for i, item := range v {
			var err error
			if out[i], err = jsonable(item); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return v, nil
}

// jsonKey is the string a go-yaml key becomes in sigs.k8s.io/yaml's JSON.
func jsonKey(k, item any) (string, error) {
	switch k := k.(type) {
	case string:
		return k, nil
	case int:
		return strconv.Itoa(k), nil
	case int64:
		return strconv.FormatInt(k, 10), nil
	case float64:
		switch s := strconv.FormatFloat(k, 'g', -1, 32); s {
		case "+Inf":
			return ".inf", nil
		case "-Inf":
			return "-.inf", nil
		case "NaN":
			return ".nan", nil
		default:
			return s, nil
		}
	case bool:
		return strconv.FormatBool(k), nil
	}
	// sigs.k8s.io/yaml's words.
	return "", fmt.Errorf("unsupported map key of type: %s, key: %+#v, value: %+#v", reflect.TypeOf(k), k, item)
}

// jsonWriter writes JSON into buf, or with a nil buf only counts its length
// in n, so that the output is allocated once at its size.
type jsonWriter struct {
	buf []byte
	n   int
}

func (w *jsonWriter) write(s string) {
	w.n += len(s)
	if w.buf != nil {
		w.buf = append(w.buf, s...)
	}
}

func (w *jsonWriter) writeByte(c byte) {
	w.n++
	if w.buf != nil {
		w.buf = append(w.buf, c)
	}
}

func (w *jsonWriter) value(v any) error {
	switch v := v.(type) {
	case object:
		w.writeByte('{')
		for i, m := range v {
			if i > 0 {
				w.writeByte(',')
			}
			w.str(m.key)
			w.writeByte(':')
			if err := w.value(m.value); err != nil {
				return err
			}
		}
		w.writeByte('}')
	case []any:
		w.writeByte('[')
		for i, item := range v {
			if i > 0 {
				w.writeByte(',')
			}
			if err := w.value(item); err != nil {
				return err
			}
		}
		w.writeByte(']')
	case string:
		w.str(v)
	default:
		// Numbers, booleans, null, timestamps: small, and encoding/json's
		// own answer (its error for NaN and infinities included).
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		w.write(string(b))
	}
	return nil
}

// str writes s as encoding/json writes a string with HTML escaping on: <, >
// and & escaped, invalid UTF-8 as U+FFFD, U+2028 and U+2029 escaped.
func (w *jsonWriter) str(s string) {
	const hex = "0123456789abcdef"
	w.writeByte('"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			w.write(s[start:i])
			switch c {
			case '"', '\\':
				w.writeByte('\\')
				w.writeByte(c)
			case '\b':
				w.write(`\b`)
			case '\f':
				w.write(`\f`)
			case '\n':
				w.write(`\n`)
			case '\r':
				w.write(`\r`)
			case '\t':
				w.write(`\t`)
			default:
				w.write(`\u00`)
				w.writeByte(hex[c>>4])
				w.writeByte(hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			w.write(s[start:i])
			w.write(`\ufffd`)
		case r == '\u2028' || r == '\u2029':
			w.write(s[start:i])
			w.write(`\u202`)
			w.writeByte(hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	w.write(s[start:])
	w.writeByte('"')
}
