package manifests

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	yamlv2 "go.yaml.in/yaml/v2"
)

// splitBoth splits out through Split (which takes the fast
// paths for a bytes.Reader) and through the decoder alone.
func splitBoth(out []byte) (fast, decoded []string, fastErr, decodedErr error) {
	fastErr = Split(bytes.NewReader(out), SinkFunc(func(doc []byte) error { fast = append(fast, string(doc)); return nil }))
	decodedErr = splitDecoded(bytes.NewReader(out), func(doc []byte) error { decoded = append(decoded, string(doc)); return nil })
	return fast, decoded, fastErr, decodedErr
}

// randomInDecoder reports output for which the decoder's own answer is not
// fixed: two keys of one mapping that become the same JSON key (YAMLToJSON
// keeps one of them, by Go's map order), or more than one key it cannot
// convert (which one is named depends on the same order).
func randomInDecoder(out []byte) bool {
	_ = splitDecoded(bytes.NewReader(out), func([]byte) error { return nil })
	random := false
	bad := 0
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[any]any:
			seen := map[string]bool{}
			for k, item := range v {
				key, err := jsonKey(k, item)
				if err != nil {
					bad++
				} else if seen[key] {
					random = true
				}
				seen[key] = true
				walk(item)
			}
		case []any:
			for _, item := range v {
				walk(item)
			}
		}
	}
	// Documents as the fast path cuts them; a document that does not parse
	// has no keys to compare.
	r := bytes.NewReader(out)
	_ = yamlDocumentExtents(r, func(start, end int64) error {
		d := &documentReader{br: bufio.NewReader(nil)}
		d.reset(r, start, end)
		text, err := io.ReadAll(d)
		if err != nil {
			return err
		}
		var v any
		if yamlv2.Unmarshal(text, &v) == nil {
			walk(v)
		}
		return nil
	})
	return random || bad > 1
}

// FuzzYAMLFastPathMatchesTheDecoder: for any output, Split
// gives what Kubernetes' YAML-or-JSON decoder gives: the same documents, in
// the same order, byte for byte, and the same error text after the same
// documents. Seeds: testdata/fuzz/FuzzYAMLFastPathMatchesTheDecoder.
func FuzzYAMLFastPathMatchesTheDecoder(f *testing.F) {
	for _, seed := range yamlSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		if randomInDecoder(out) {
			t.Skip("the decoder's answer depends on map order")
		}
		fast, decoded, fastErr, decodedErr := splitBoth(out)
		if fmt.Sprint(fastErr) != fmt.Sprint(decodedErr) || fmt.Sprintf("%q", fast) != fmt.Sprintf("%q", decoded) {
			t.Errorf("%q:\nfast    %q (%v)\ndecoder %q (%v)", out, fast, fastErr, decoded, decodedErr)
		}
	})
}

// yamlSeeds are the shapes the fast path must get right: separators and
// their errors, line ends, empty and null documents, key conversions, string
// escaping, numbers, anchors and merges, tags, go-yaml's errors.
var yamlSeeds = []string{
	"",
	"\n\n",
	"a: 1\n",
	"a: 1",
	"a: 1\r\nb: 2\r\n",
	"a: 1\r",
	"a: \"x\r\ny\"\r\n---\r\nb: 2",
	"---\n---\n---\n",
	"---\na: 1\n---\n",
	"a: 1\n--- # comment\nb: 2\n",
	"a: 1\n---   \nb: 2\n",
	"a: 1\n--- b: 2\n",
	"a: 1\n----\nb: 2\n",
	"a: 1\n---x\nb: 2\n",
	"a: 1\n...\n---\nb: 2\n",
	"---\n# comment only\n---\na: 1\n---\nnull\n---\n\nb: [x]\n",
	"~\n---\n\"str\"\n---\n5\n---\n[1, 2]\n",
	"[1, {\"a\": 2}]\n---\nb: 1\n",
	"  \n{\"a\":1}\n",
	"z: 1\na: 2\nm: {y: 1, b: [c, d]}\n",
	"1: a\n2.5: b\ntrue: c\n0x10: d\n1e3: e\n.inf: f\n-.inf: g\n.nan: h\n",
	"~: a\n",
	"18446744073709551615: a\n",
	"a: 18446744073709551615\nb: -9223372036854775808\nc: 1.5e300\nd: 0.000001\ne: 1e-7\nf: .inf\n",
	"a: .nan\n",
	"a: yes\nb: no\nc: on\nd: off\ne: y\n",
	"s: \"<tag> & \\u2028 \\u2029 \\x01 \\x7f \\t\\b\\f\"\n",
	"s: \"\\xff\"\n",
	"b: !!binary aGVsbG8=\n",
	"t: !!timestamp 2001-12-14t21:59:43.10-05:00\nu: 2001-12-14\n",
	"base: &b {x: 1, y: 2}\nderived:\n  <<: *b\n  y: 3\n",
	"a: &a [1, 2]\nb: *a\n",
	"a: [\n",
	"a: b: c\n",
	"? [a, b]\n: c\n",
	"key: |\n  line one\n  line two\n\nfolded: >\n  one\n  two\n",
	"a: 1\nb: *missing\n",
	"\xef\xbb\xbfa: 1\n",
	"apiVersion: v1\nkind: List\nitems:\n- kind: ConfigMap\n  metadata: {name: a}\n",
	"%YAML 1.1\n---\na: 1\n",
	"a: 1\n---\n{\"b\": 2}\n",
	"\u0085a: 1\n",
	"1: a\n\"1\": b\n",
	// A stream whose first value is a JSON array is YAML to the decoder
	// (only a leading '{' makes it JSON), so it is re-marshalled: white
	// space dropped, keys sorted, numbers as go-yaml reads them (issue 37).
	"[0, 0,{}]",
	"[{\"b\": 1, \"a\": 2}]\n{\"c\": 1.0}\n",
	"[1.0, \"<\"]\n",
	// A '{' past the decoder's sniff is YAML to it too.
	strings.Repeat(" ", yamlSniff) + "{\"b\": 1, \"a\": 2}\n",
	strings.Repeat("\n", yamlSniff-1) + "{\"b\": 1, \"a\": 2}\n",
}

// TestYAMLFastPathMatchesTheDecoder runs the seeds as a plain test.
func TestYAMLFastPathMatchesTheDecoder(t *testing.T) {
	t.Parallel()
	for _, seed := range yamlSeeds {
		if randomInDecoder([]byte(seed)) {
			continue
		}
		fast, decoded, fastErr, decodedErr := splitBoth([]byte(seed))
		if fmt.Sprint(fastErr) != fmt.Sprint(decodedErr) || fmt.Sprintf("%q", fast) != fmt.Sprintf("%q", decoded) {
			t.Errorf("%q:\nfast    %q (%v)\ndecoder %q (%v)", seed, fast, fastErr, decoded, decodedErr)
		}
	}
}
