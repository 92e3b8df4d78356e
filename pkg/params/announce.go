package params

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// maxQuoted bounds how much of a bad dynamic output an error message repeats.
const maxQuoted = 256

// ParseAnnouncements decodes what a parameters.dynamic command printed: a JSON
// array of announcements. Each entry is validated and normalised (value fields that
// do not match its collectionType are dropped). Anything else, e.g. a JSON object,
// is an error that quotes the start of the output so the author sees what went wrong.
// JSON null is no announcements: Argo CD decodes the output into a slice, which
// null leaves empty, and tools such as jq print null for a missing key.
func ParseAnnouncements(out []byte) ([]Announcement, error) {
	trimmed := bytes.TrimSpace(out)
	if string(trimmed) == "null" {
		return nil, nil
	}
	if len(trimmed) == 0 {
		return nil, fmt.Errorf("dynamic parameters command printed nothing; it must print a JSON array of parameter announcements")
	}
	if trimmed[0] != '[' {
		return nil, fmt.Errorf("dynamic parameters command must print a JSON array of parameter announcements, it printed %s", quote(trimmed))
	}
	var as []Announcement
	if err := json.Unmarshal(trimmed, &as); err != nil {
		return nil, fmt.Errorf("dynamic parameters output is not a JSON array of parameter announcements (%w); it printed %s", err, quote(trimmed))
	}
	for i := range as {
		if err := ValidateAnnouncement(as[i]); err != nil {
			return nil, fmt.Errorf("dynamic parameter announcement %d: %w", i, err)
		}
		as[i] = normalize(as[i])
	}
	return as, nil
}

// Merge is the announcement the UI gets: dynamic entries followed by static ones,
// without de-duplication, as Argo CD does. Static entries are normalised too.
func Merge(dynamic, static []Announcement) []Announcement {
	out := make([]Announcement, 0, len(dynamic)+len(static))
	out = append(out, dynamic...)
	for _, a := range static {
		out = append(out, normalize(a))
	}
	return out
}

// quote renders at most maxQuoted bytes of b as a Go-quoted string, marking a cut.
func quote(b []byte) string {
	if len(b) <= maxQuoted {
		return fmt.Sprintf("%q", b)
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return fmt.Sprintf("%q… (%d bytes in total)", b[:cut], len(b))
}
