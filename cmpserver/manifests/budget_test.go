package manifests

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	yamlv2 "go.yaml.in/yaml/v2"
)

// manyKeys is issue 37 item 7's document in small: one ConfigMap whose data
// has keys short keys with short values (about 14 bytes a key).
func manyKeys(keys int) []byte {
	var b bytes.Buffer
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: many\ndata:\n")
	for i := range keys {
		fmt.Fprintf(&b, "  k%07d: v\n", i)
	}
	return b.Bytes()
}

// splitFile splits out from a file, as GenerateManifest does (the stdout
// spool), into a response, and returns the peak heap and the error.
func splitFile(t *testing.T, out []byte) (peak uint64, m *response, err error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "out")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m = &response{}
	peak, _ = heapPeak(func() { err = Split(io.NewSectionReader(f, 0, int64(len(out))), m) })
	return peak, m, err
}

// TestManyKeysRefused: a document of more keys than the budget allows is
// refused with a message naming the limit, at the cost of a scan: issue 37's
// 4,000,000 keys (56 MB) peaked at 2.11 GB; 400,000 keys (5.5 MB) peaked at
// 33 × their size before the budget.
func TestManyKeysRefused(t *testing.T) {
	keys := 4_000_000
	if testing.Short() {
		keys = 400_000
	}
	out := manyKeys(keys)
	peak, m, err := splitFile(t, out)
	ratio := float64(peak) / float64(len(out))
	t.Logf("%d keys, %.1f MiB of YAML: peak heap %.1f MiB (%.1f × the output), %d manifests, err %v",
		keys, float64(len(out))/(1<<20), float64(peak)/(1<<20), ratio, m.count, err)
	want := fmt.Sprintf("has more than %d keys, values and items: cmp-server does not decode it", maxYAMLDocumentTokens)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "failed to unmarshal manifest: YAML document 1 ") {
		t.Errorf("got %v, want the budget's refusal", err)
	}
	if ratio > 3 {
		t.Errorf("peak heap %.1f × the output's size, want at most 3 × for a refused document", ratio)
	}

	// The same through the decoder's path: output that starts like JSON
	// but is YAML (a flow mapping) is not the fast path's.
	var flow bytes.Buffer
	flow.WriteString(`{"apiVersion": "v1", "kind": "ConfigMap", "data": {`)
	for i := range 400_000 {
		fmt.Fprintf(&flow, "k%07d: v, ", i)
	}
	flow.WriteString("}}\n")
	_, _, err = splitFile(t, flow.Bytes())
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("flow mapping: got %v, want the budget's refusal", err)
	}
}

// TestManyKeysWithinBudget: the densest document the budget takes (two
// tokens a key) costs what a 64 MiB document does, not more.
func TestManyKeysWithinBudget(t *testing.T) {
	keys := maxYAMLDocumentTokens/2 - 100
	out := manyKeys(keys)
	peak, m, err := splitFile(t, out)
	t.Logf("%d keys, %.1f MiB of YAML: peak heap %.1f MiB (%.1f × the output), %d manifests, err %v",
		keys, float64(len(out))/(1<<20), float64(peak)/(1<<20), float64(peak)/float64(len(out)), m.count, err)
	if err != nil || m.count != 1 {
		t.Fatalf("%d manifests, %v: want the document", m.count, err)
	}
	if peak > 256<<20 {
		t.Errorf("peak heap %.1f MiB, want at most 256 MiB", float64(peak)/(1<<20))
	}
}

// yamlValues counts the values go-yaml decodes from v (every key, value and
// item, collections included), about its node count.
func yamlValues(v any) int {
	switch v := v.(type) {
	case map[any]any:
		n := 1
		for k, item := range v {
			n += yamlValues(k) + yamlValues(item)
		}
		return n
	case []any:
		n := 1
		for _, item := range v {
			n += yamlValues(item)
		}
		return n
	}
	return 1
}

// tokenSeeds are the shapes the count must not miss: block scalars whose
// parent is a key, an entry or a line above, empty keys and values, flow
// collections, quoted scalars over lines, comments.
var tokenSeeds = []string{
	"- a: |\n    text: not a key\n  b: c\n  d: e\n- f\n",
	"k:\n  |\n  text\nj: v\n",
	"--- |\n  a: b\n",
	"{a, b, c}\n",
	":\n:\n:\n",
	"? a\n: b\n? c\n",
	"a: 'x\n  y': z\n",
	"- - - x\n  - y\n- z\n",
	"a: b # c: d\n# e: f\ng: [h, i, {j: k}]\n",
	"\"a\":\"b\"\n",
	"a: >-\n  folded\n  text\nb: &x !!str c\n",
	"- \n-\n- ''\n",
	"[[], {}, [[]]]\n",
	"x: |\rk1: v\rk2: v\rk3:\r",
	"x: >\u0085k1: v\u2028k2: v\u2029k3:\n",
}

// FuzzYAMLTokensBoundNodes: whatever go-yaml decodes has at most 2 values
// for each token counted (plus the document), so the budget bounds what
// go-yaml holds. Seeds: tokenSeeds and testdata/fuzz/FuzzYAMLTokensBoundNodes.
func FuzzYAMLTokensBoundNodes(f *testing.F) {
	for _, seed := range append(tokenSeeds, yamlSeeds...) {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		if bytes.ContainsRune(text, '*') || len(text) > 4096 {
			t.Skip("aliases expand values beyond the nodes")
		}
		var v any
		if yamlv2.Unmarshal(text, &v) != nil {
			return
		}
		values := yamlValues(v)
		// Whole lines, and lines cut into pieces of 14 bytes.
		for _, window := range []int{16 << 10, 16} {
			tokens, err := countYAMLTokensWindow(bytes.NewReader(text), 1<<30, window)
			if err != nil {
				t.Fatal(err)
			}
			if values > 2*tokens+2 {
				t.Fatalf("%q: %d values decoded, %d tokens counted (window %d)", text, values, tokens, window)
			}
		}
	})
}

// TestTokensSkipText: the text of block scalars, quoted scalars and comments
// counts nothing, so a ConfigMap of a few large files (a dashboard's JSON, a
// config file of "key: value" lines) is far within the budget.
func TestTokensSkipText(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: files # a comment: with: colons\ndata:\n  app.conf: |\n")
	for i := range 200_000 {
		fmt.Fprintf(&b, "    key%d: value, [x], {y}, - z\n\n", i)
	}
	b.WriteString("  dashboard.json: \"{\\\"a\\\": [1, 2, 3],\n    \\\"b\\\": {\\\"c\\\": 4}}\"\n  last: 'it''s: [a]'\n")
	n, err := countYAMLTokens(bytes.NewReader(b.Bytes()), maxYAMLDocumentTokens)
	if err != nil {
		t.Fatal(err)
	}
	// apiVersion v1 kind ConfigMap metadata (its value below) name files
	// data (its value below) app.conf | dashboard.json "…" last '…'
	if n != 16 {
		t.Errorf("%d tokens, want 16", n)
	}
}

// TestTokensLongLine: a line longer than the scanner's window (a large value)
// is scanned in pieces, never held, and what a piece boundary cuts (a plain
// scalar with a quote or '|' in it, a backslash escape, the indentation) does
// not hide the keys that follow.
func TestTokensLongLine(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("a: ")
	for b.Len() < 8<<20 {
		b.WriteString("x'|#\\\"") // x ' | # \ ": in a plain scalar none is special
	}
	b.WriteString("\nb: \"")
	for b.Len() < 16<<20 {
		b.WriteString(`\\\"'#`)
	}
	b.WriteString("\"\n")
	b.WriteString(strings.Repeat(" ", 40000) + "c: d\n")
	for i := range 1000 {
		fmt.Fprintf(&b, "k%d: v\n", i)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	n, err := countYAMLTokens(bytes.NewReader(b.Bytes()), 1<<30)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("%.1f MiB of text, lines of 8 MiB: %d tokens, %d bytes allocated", float64(b.Len())/(1<<20), n, allocated)
	// a, the plain value (and one more per 16 KiB piece it spans), b, its
	// quoted value, c, d and the 1,000 keys' 2,000 tokens.
	if n < 2006 {
		t.Errorf("%d tokens, want at least 2,006: a piece boundary hid some", n)
	}
	if allocated > 1<<20 {
		t.Errorf("%d bytes allocated to scan, want the window only", allocated)
	}
}
