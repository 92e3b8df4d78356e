package manifests

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// go-yaml holds a whole document as its node tree (about 110 bytes a node,
// yamlstream.go) and then as decoded values, so a document of many small
// nodes costs far more than its text: a ConfigMap of 300,000 keys like
// "k0000001: v" (4 MiB) peaked at 133 MiB, 33 × its size, and the 4,000,000
// keys (56 MB) under the 64 MiB stdout cap of issue 37 at 2.11 GB, in a
// 512 MiB sidecar. Nothing in go-yaml bounds it, so each YAML document is
// first scanned for its tokens (scalars, indicators that make a node), a
// cheap pass over the text that holds nothing, and a document with more than
// maxYAMLDocumentTokens is refused before it is parsed. A block key's value
// is counted as a token when it is not on the key's line (an empty value or a
// collection below), so in block style a node is a token; in flow style an
// empty value comes with a token of its own, so a document within the budget
// has at most 2 × maxYAMLDocumentTokens nodes (FuzzYAMLTokensBoundNodes).

// maxYAMLDocumentTokens bounds the tokens of one YAML document of a generate
// output: at about 230 bytes of heap per token for the densest YAML (short
// keys and values; prose and long values cost far less per byte), 500,000
// tokens are about 110 MiB, what the 64 MiB documents the stdout cap allows
// already cost. Argo CD's ApplicationSet CRD (1.5 MB) has 52,671.
const maxYAMLDocumentTokens = 500_000

// errTooManyTokens words a document over the budget; Argo CD shows it in the
// Application's condition.
func errTooManyTokens(doc int, start, end int64, budget int) error {
	return fmt.Errorf("failed to unmarshal manifest: YAML document %d (bytes %d to %d of the output) has more than %d keys, values and items: cmp-server does not decode it, since go-yaml would need about 230 bytes of memory for each (limit of cmp-server; split the object, or put the data in fewer, longer values)",
		doc, start, end, budget)
}

// checkYAMLTokens fails the first document of r (its extents as the decoder
// cuts them) with more than budget tokens.
func checkYAMLTokens(r sizedReaderAt, budget int) error {
	text := &documentReader{br: bufio.NewReaderSize(nil, 16<<10)}
	doc := 0
	return yamlDocumentExtents(r, func(start, end int64) error {
		doc++
		text.reset(r, start, end)
		n, err := countYAMLTokens(text, budget)
		if err != nil {
			return err // documentReader's, in the decoder's words
		}
		if n > budget {
			return errTooManyTokens(doc, start, end, budget)
		}
		return nil
	})
}

// countYAMLTokens counts the tokens of one YAML document up to the first
// that exceeds limit (then limit+1). A token is a scalar (plain: up to ": ",
// " #" or the line's end; quoted: to its closing quote, over lines), an
// alias, anchor or tag, a block entry "-", a "?", a ':' that follows no key
// (an empty key) or ends a block key's line (a value below, or none), a flow
// collection's start, or a ',' in one. Comments and
// the lines of block scalars ("|", ">") count nothing. The count errs on the
// high side where YAML is ambiguous without a parser (a plain scalar's
// continuation lines, a block scalar on a line of its own), never the low.
func countYAMLTokens(r io.Reader, limit int) (int, error) {
	br := bufio.NewReaderSize(r, 16<<10)
	s := tokenScanner{block: -1}
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: gather it (a long value).
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		for len(line) > 0 {
			// go-yaml also ends a line at '\r', NEL, LS and PS: a block
			// scalar's header must not hide the lines after one.
			n := lineEnd(line)
			s.line(line[:n])
			line = line[n:]
			if s.n > limit {
				return s.n, nil
			}
		}
		if errors.Is(err, io.EOF) {
			return s.n, nil
		}
		if err != nil {
			return s.n, err
		}
	}
}

// tokenScanner is countYAMLTokens' state between lines.
type tokenScanner struct {
	n     int  // tokens so far
	flow  int  // depth of flow collections
	quote byte // the open quoted scalar's quote, 0 if none
	// block >= 0: inside a block scalar, whose lines are those more
	// indented than block (and blank lines).
	block      int
	parent     int  // this line's column of the last key or entry, -1 if none
	keyPending bool // the last token may be a key: a ':' after it adds no node
	keyCol     int  // its column
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isFlowIndicator(c byte) bool { return c == ',' || c == '[' || c == ']' || c == '{' || c == '}' }

func (s *tokenScanner) line(line []byte) {
	indent := 0
	for indent < len(line) && line[indent] == ' ' {
		indent++
	}
	blank := len(trimBlank(line)) == 0
	if s.block >= 0 {
		if blank || indent > s.block {
			return
		}
		s.block = -1
	}
	s.parent = -1
	if s.flow == 0 {
		s.keyPending = false // a block key and its ':' share a line
	}
	i := 0
	if s.quote != 0 {
		i = s.skipQuoted(line, 0)
	}
	for i < len(line) {
		c := line[i]
		switch {
		case isBlank(c):
			i++
			continue
		case c == '#' && (i == 0 || isBlank(line[i-1])):
			return // a comment, to the line's end
		case c == '%' && i == 0:
			return // a directive
		}
		next := byte('\n')
		if i+1 < len(line) {
			next = line[i+1]
		}
		switch {
		case c == '"' || c == '\'':
			s.n++
			s.quote = c
			i = s.skipQuoted(line, i+1)
			s.keyPending = true
		case c == '[' || c == '{':
			s.n++
			s.flow++
			s.keyPending = false
			i++
		case c == ']' || c == '}':
			if s.flow > 0 {
				s.flow--
			}
			s.keyPending = true
			i++
		case c == ',' && s.flow > 0:
			s.n++
			s.keyPending = false
			i++
		case c == ':' && (isBlank(next) || (s.flow > 0 && (isFlowIndicator(next) || s.keyPending))):
			// A value indicator: after a key it adds the value's node
			// (counted when it comes, or covered by the key if empty);
			// without one it is an empty key's.
			if s.keyPending {
				s.parent = s.keyCol
				if s.flow == 0 && restBlank(line, i+1) {
					// The value is on the lines below or empty: its node
					// (a collection, or null) has no token of its own.
					s.n++
				}
			} else {
				s.n++
				s.parent = i
			}
			s.keyPending = false
			i++
		case (c == '-' || c == '?') && isBlank(next) && s.flow == 0:
			s.n++
			s.parent = i
			s.keyPending = false
			i++
		case (c == '|' || c == '>') && s.flow == 0:
			// A block scalar: the rest of this line is its header, and
			// the lines more indented than its parent are its text.
			s.n++
			parent := s.parent
			if parent < 0 {
				parent = indent - 1
			}
			s.block = max(parent, 0)
			return
		default:
			// A plain scalar, alias, anchor or tag, to the end of its run.
			s.n++
			s.keyPending, s.keyCol = true, i
			i = s.skipPlain(line, i)
		}
	}
}

// skipQuoted skips the quoted scalar open since before i, and returns where
// it ends; at the line's end it is still open.
func (s *tokenScanner) skipQuoted(line []byte, i int) int {
	for i < len(line) {
		c := line[i]
		switch {
		case s.quote == '"' && c == '\\':
			i += 2
			continue
		case c == s.quote:
			if s.quote == '\'' && i+1 < len(line) && line[i+1] == '\'' {
				i += 2 // '' is a quote
				continue
			}
			s.quote = 0
			return i + 1
		}
		i++
	}
	return i
}

// skipPlain returns where the plain scalar (or alias, anchor, tag) at i
// ends: at a value indicator, a comment, the line's end, or in a flow
// collection a flow indicator. Anchors, tags and aliases end at a blank.
func (s *tokenScanner) skipPlain(line []byte, i int) int {
	property := line[i] == '&' || line[i] == '!' || line[i] == '*'
	for i < len(line) {
		c := line[i]
		next := byte('\n')
		if i+1 < len(line) {
			next = line[i+1]
		}
		switch {
		case c == '\n' || c == '\r':
			return i
		case property && isBlank(c):
			return i
		case c == ':' && (isBlank(next) || (s.flow > 0 && isFlowIndicator(next))):
			return i
		case c == '#' && i > 0 && isBlank(line[i-1]):
			return i
		case s.flow > 0 && isFlowIndicator(c):
			return i
		}
		i++
	}
	return i
}

// trimBlank is line without leading spaces and tabs.
func trimBlank(line []byte) []byte {
	for len(line) > 0 && isBlank(line[0]) {
		line = line[1:]
	}
	return line
}

// lineEnd is the length of the first line of b, its break included: YAML's
// breaks are '\n', '\r' (alone or before '\n'), NEL (U+0085), LS (U+2028)
// and PS (U+2029).
func lineEnd(b []byte) int {
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '\n':
			return i + 1
		case '\r':
			if i+1 < len(b) && b[i+1] == '\n' {
				return i + 2
			}
			return i + 1
		case 0xC2:
			if i+1 < len(b) && b[i+1] == 0x85 {
				return i + 2
			}
		case 0xE2:
			if i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xA8 || b[i+2] == 0xA9) {
				return i + 3
			}
		}
	}
	return len(b)
}

// restBlank reports whether line has nothing but blanks or a comment from i.
func restBlank(line []byte, i int) bool {
	for ; i < len(line); i++ {
		switch line[i] {
		case ' ', '\t':
		case '\n', '\r', '#':
			return true
		default:
			return false
		}
	}
	return true
}
