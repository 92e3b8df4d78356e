package redact

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzStreamRedaction: whatever the input and however it is cut into writes,
// the stream's output is the whole input's redaction, and neither the value
// nor another planted value is left in it. Seeds: testdata/fuzz.
func FuzzStreamRedaction(f *testing.F) {
	f.Add("token-123456", "x token-123456 y", uint8(3))
	f.Add(`q"u\ote<d>`, `{"e":"q\"u\\ote<d>"}`, uint8(1))
	f.Add("aaaaaa", "aaaaaaaaaaaaaaaaa", uint8(5))
	f.Fuzz(func(t *testing.T, value, text string, step uint8) {
		// A value the tag itself could spell ("[redacted V]") cannot be
		// told apart from the tag; values are env values, and a tag's
		// characters in one would only over-redact, never leak.
		// Nor can a value one of whose spellings (upper- or lower-cased,
		// encoded) the tags spell.
		const tags = "[redacted V] [redacted W]"
		inTag := false
		for _, s := range spellings(value) {
			inTag = inTag || (len(s) >= MinLen && strings.Contains(tags, s))
		}
		if len(value) < MinLen || strings.ContainsAny(value, "[] ") || inTag {
			t.Skip()
		}
		r := newRedactor(map[string]string{"V": value, "W": value + "-2"})
		// Plant the value where the fuzzer says and once more at the end.
		in := text + value
		want := r.String(in)
		for _, s := range spellings(value) {
			if len(s) >= MinLen && strings.Contains(want, s) {
				t.Fatalf("String(%q) = %q still holds %q", in, want, s)
			}
		}
		var out bytes.Buffer
		st := r.Stream(&out)
		n := int(step%16) + 1
		for i := 0; i < len(in); i += n {
			_, _ = st.Write([]byte(in[i:min(i+n, len(in))]))
		}
		if err := st.Flush(); err != nil {
			t.Fatal(err)
		}
		if out.String() != want {
			t.Fatalf("stream in writes of %d: %q, want %q", n, out.String(), want)
		}
	})
}
