package redact

import "io"

// Stream is a writer that redacts what goes through it to w, for output read
// in chunks (a command's stderr read from its pipe): a value split across two
// writes is still found, because the last maxLen-1 bytes are held back until
// the next write shows how they go on, or until Flush. Output arrives late by
// at most that much and never out of order.
type Stream struct {
	r       *Redactor
	w       io.Writer
	pending []byte
	err     error
}

// Stream redacts into w; nil or empty r passes writes through.
func (r *Redactor) Stream(w io.Writer) *Stream { return &Stream{r: r, w: w} }

// Write takes p whole: the returned count is len(p) unless w failed.
func (s *Stream) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.r.Empty() {
		_, s.err = s.w.Write(p)
		return len(p), s.err
	}
	s.pending = append(s.pending, p...)
	// A value starting before limit ends within pending if it is there at
	// all (none is longer than maxLen), so everything before limit can be
	// decided now.
	limit := len(s.pending) - (s.r.maxLen - 1)
	if limit <= 0 {
		return len(p), nil
	}
	s.emit(limit)
	return len(p), s.err
}

// Flush redacts and writes what is held back: call it once the input ended.
func (s *Stream) Flush() error {
	if s.err == nil && len(s.pending) > 0 {
		s.emit(len(s.pending))
	}
	return s.err
}

func (s *Stream) emit(limit int) {
	out, used := s.r.scan(nil, s.pending, limit)
	s.pending = append(s.pending[:0], s.pending[used:]...)
	if len(out) > 0 {
		_, s.err = s.w.Write(out)
	}
}

// Writer redacts each Write whole, for writers that are given one complete
// message at a time (zap writes each log entry with one Write) and must pass
// it on at once.
func (r *Redactor) Writer(w io.Writer) io.Writer {
	if r.Empty() {
		return w
	}
	return writer{r, w}
}

type writer struct {
	r *Redactor
	w io.Writer
}

func (w writer) Write(p []byte) (int, error) {
	if _, err := w.w.Write(w.r.Bytes(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}
