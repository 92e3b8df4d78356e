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
	return countYAMLTokensWindow(r, limit, 16<<10)
}

// countYAMLTokensWindow is countYAMLTokens reading window bytes at a time
// (at least 16): the text is scanned a window at a time, never a whole line,
// which may be a 60 MiB value. A window without a line break is cut two
// bytes short, so that a break of several bytes (NEL, LS, PS) is never split.
func countYAMLTokensWindow(r io.Reader, limit, window int) (int, error) {
	br := bufio.NewReaderSize(r, window)
	s := tokenScanner{block: -1}
	cont := false // the next piece continues the line of the last one
	for {
		window, err := br.Peek(br.Size())
		if len(window) == 0 {
			if err == nil || errors.Is(err, io.EOF) {
				return s.n, nil
			}
			return s.n, err
		}
		n, broke := lineEnd(window)
		ended := broke || err != nil // a break, or the text's end
		if !ended {
			n -= 2
		}
		s.piece(window[:n], cont, ended)
		cont = !ended
		if _, err := br.Discard(n); err != nil {
			return s.n, err
		}
		if s.n > limit {
			return s.n, nil
		}
	}
}

// tokenScanner is countYAMLTokens' state between pieces of text.
type tokenScanner struct {
	n     int  // tokens so far
	flow  int  // depth of flow collections
	quote byte // the open quoted scalar's quote, 0 if none
	// escape: the last piece ended in a double-quoted scalar's backslash.
	escape bool
	// block >= 0: inside a block scalar, whose lines are those more
	// indented than block (and blank lines).
	block      int
	parent     int  // this line's column of the last key or entry, -1 if none
	keyPending bool // the last token may be a key: a ':' after it adds no node
	keyCol     int  // its column

	// The line being scanned, over pieces.
	base     int  // its bytes in earlier pieces
	indent   int  // its indentation so far
	atStart  bool // still in its indentation
	skipRest bool // the rest of it counts nothing (a comment, a block scalar)
	plain    bool // a plain scalar (or property) runs on from the last piece
	property bool // that run is an anchor, tag or alias
	prev     byte // the byte before this piece
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isFlowIndicator(c byte) bool { return c == ',' || c == '[' || c == ']' || c == '{' || c == '}' }

// piece scans the next piece of text: a whole line, or part of one (cont:
// it continues the last piece's line; ended: it ends its line). The byte
// after a piece that does not end its line is taken as a blank, which can
// only count more.
func (s *tokenScanner) piece(piece []byte, cont, ended bool) {
	if !cont {
		s.base, s.indent, s.atStart, s.skipRest, s.plain, s.prev = 0, 0, true, false, false, '\n'
	}
	defer func() {
		s.base += len(piece)
		if len(piece) > 0 {
			s.prev = piece[len(piece)-1]
		}
	}()
	if s.skipRest {
		return
	}
	i := 0
	if s.atStart {
		for i < len(piece) && piece[i] == ' ' {
			i++
		}
		s.indent += i
		if i == len(piece) && !ended {
			return // the indentation goes on in the next piece
		}
		s.atStart = false
		if s.block >= 0 {
			if (ended && len(trimBlank(piece[i:])) == 0) || s.indent > s.block {
				s.skipRest = true // a line of the block scalar's text
				return
			}
			s.block = -1
		}
		s.parent = -1
		if s.flow == 0 {
			s.keyPending = false // a block key and its ':' share a line
		}
	}
	if s.escape && i < len(piece) {
		s.escape = false
		i++
	}
	switch {
	case s.quote != 0:
		i = s.skipQuoted(piece, i)
	case s.plain:
		i = s.skipPlain(piece, i, ended)
	}
	for i < len(piece) {
		c := piece[i]
		col := s.base + i
		before := s.prev
		if i > 0 {
			before = piece[i-1]
		}
		switch {
		case isBlank(c):
			i++
			continue
		case c == '#' && isBlank(before):
			s.skipRest = true // a comment, to the line's end
			return
		case c == '%' && col == 0:
			s.skipRest = true // a directive
			return
		}
		next := byte('\n')
		if i+1 < len(piece) {
			next = piece[i+1]
		}
		switch {
		case c == '"' || c == '\'':
			s.n++
			s.quote = c
			i = s.skipQuoted(piece, i+1)
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
			// (counted when it comes); without one it is an empty key's.
			if s.keyPending {
				s.parent = s.keyCol
				if s.flow == 0 && restBlank(piece, i+1) {
					// The value is on the lines below or empty: its node
					// (a collection, or null) has no token of its own.
					s.n++
				}
			} else {
				s.n++
				s.parent = col
			}
			s.keyPending = false
			i++
		case (c == '-' || c == '?') && isBlank(next) && s.flow == 0:
			s.n++
			s.parent = col
			s.keyPending = false
			i++
		case (c == '|' || c == '>') && s.flow == 0:
			// A block scalar: the rest of this line is its header, and
			// the lines more indented than its parent (the key or entry
			// before it on this line, else a column left of it) are its
			// text.
			s.n++
			parent := s.parent
			if parent < 0 {
				parent = col - 1
			}
			s.block = max(parent, 0)
			s.skipRest = true
			return
		default:
			// A plain scalar, alias, anchor or tag, to the end of its run.
			s.n++
			s.keyPending, s.keyCol = true, col
			s.property = c == '&' || c == '!' || c == '*'
			i = s.skipPlain(piece, i, ended)
		}
	}
}

// skipQuoted skips the quoted scalar open since before i, and returns where
// it ends; at the piece's end it is still open.
func (s *tokenScanner) skipQuoted(piece []byte, i int) int {
	for i < len(piece) {
		c := piece[i]
		switch {
		case s.quote == '"' && c == '\\':
			if i+1 == len(piece) {
				s.escape = true // what it escapes is in the next piece
			}
			i += 2
			continue
		case c == s.quote:
			if s.quote == '\'' && i+1 < len(piece) && piece[i+1] == '\'' {
				i += 2 // '' is a quote
				continue
			}
			s.quote = 0
			return i + 1
		}
		i++
	}
	return min(i, len(piece))
}

// skipPlain returns where the plain scalar (or anchor, tag, alias: a
// property) running at i ends: at a value indicator, a comment, the line's
// end, or in a flow collection a flow indicator; a property at a blank. At
// the end of a piece that does not end its line, the run goes on (s.plain).
func (s *tokenScanner) skipPlain(piece []byte, i int, ended bool) int {
	s.plain = false
	for i < len(piece) {
		c := piece[i]
		next := byte('\n')
		if i+1 < len(piece) {
			next = piece[i+1]
		}
		before := s.prev
		if i > 0 {
			before = piece[i-1]
		}
		switch {
		case c == '\n' || c == '\r':
			return i
		case s.property && isBlank(c):
			return i
		case c == ':' && (isBlank(next) || (s.flow > 0 && isFlowIndicator(next))):
			return i
		case c == '#' && isBlank(before):
			return i
		case s.flow > 0 && isFlowIndicator(c):
			return i
		}
		i++
	}
	s.plain = !ended
	return i
}

// trimBlank is line without leading spaces and tabs.
func trimBlank(line []byte) []byte {
	for len(line) > 0 && isBlank(line[0]) {
		line = line[1:]
	}
	return line
}

// lineEnd is the length of the first line of b, its break included, and
// whether it has one: YAML's breaks are '\n', '\r' (alone or before '\n'),
// NEL (U+0085), LS (U+2028) and PS (U+2029).
func lineEnd(b []byte) (int, bool) {
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '\n':
			return i + 1, true
		case '\r':
			if i+1 < len(b) && b[i+1] == '\n' {
				return i + 2, true
			}
			return i + 1, true
		case 0xC2:
			if i+1 < len(b) && b[i+1] == 0x85 {
				return i + 2, true
			}
		case 0xE2:
			if i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xA8 || b[i+2] == 0xA9) {
				return i + 3, true
			}
		}
	}
	return len(b), false
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
