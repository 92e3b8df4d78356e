package cmpserver

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
)

// bigDocument is one ConfigMap of about size bytes, as YAML or as JSON: 1 KiB
// values under numbered keys, the shape of a plugin that packs files into one
// object.
func bigDocument(size int, asJSON bool) []byte {
	var b bytes.Buffer
	value := strings.Repeat("x", 1000)
	if asJSON {
		b.WriteString(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{`)
		for i := 0; b.Len() < size; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"k%07d":"%s"`, i, value)
		}
		b.WriteString("}}\n")
		return b.Bytes()
	}
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n")
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "  k%07d: %s\n", i, value)
	}
	return b.Bytes()
}

// splitAllocs splits doc from a file into a response, as GenerateManifest
// does, and returns the bytes allocated meanwhile.
func splitAllocs(t *testing.T, doc []byte) (allocated uint64, m *encodedManifests) {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(doc); err != nil || func() error { _, err := f.Seek(0, 0); return err }() != nil {
		t.Fatal(err)
	}
	m = &encodedManifests{}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	// The stdout spool's reader (spool.reader).
	if err := splitManifestStream(io.NewSectionReader(f, 0, int64(len(doc))), m.add); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, m
}

// TestLargeDocumentMemory: one large JSON document costs at most about twice
// its size to split (the response holds it once), so a plugin that prints one
// huge object fits the sidecar like one that prints many small ones (it cost
// 8 ×). YAML's figure is printed, not checked (26 ×: see jsonstream.go). Bytes allocated bound the peak from above, and do not depend on when
// the garbage collector runs.
func TestLargeDocumentMemory(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		name := map[bool]string{false: "yaml", true: "json"}[asJSON]
		size := 40 << 20
		if testing.Short() && !asJSON {
			size = 8 << 20 // YAML's conversion takes seconds
		}
		t.Run(name, func(t *testing.T) {
			doc := bigDocument(size, asJSON)
			allocated, m := splitAllocs(t, doc)
			if m.count != 1 {
				t.Fatalf("%d manifests, want 1", m.count)
			}
			ratio := float64(allocated) / float64(len(doc))
			t.Logf("%s document of %.1f MiB: %.1f MiB allocated while split (%.2f × its size), response %.1f MiB",
				name, float64(len(doc))/(1<<20), float64(allocated)/(1<<20), ratio, float64(m.size)/(1<<20))
			// YAML still goes through sigs.k8s.io/yaml's conversion (an
			// interface{} tree, then json.Marshal): only figures for it.
			// The margin over 2 × is for what other goroutines of the
			// test binary allocate meanwhile (TotalAlloc is the process's).
			if asJSON && ratio > 3 {
				t.Errorf("%.2f × the document's size allocated, want at most 3 × (2 × plus slack)", ratio)
			}
		})
	}
}

// onlyReader hides bytes.Reader's ReaderAt: the generic splitter alone.
type onlyReader struct{ io.Reader }

// TestJSONFastPathMatchesTheDecoder: outputs the fast path takes give exactly
// what the generic decoder gives, and outputs it leaves (scalars, YAML after
// JSON, broken JSON) still get the decoder's answer.
func TestJSONFastPathMatchesTheDecoder(t *testing.T) {
	t.Parallel()
	for _, out := range []string{
		`{"a":1}`,
		"\n {\"a\":1}\r\n\t{\"b\":\"}\\\"{[\"}\n",
		`{}{}[1,2] [ ]`,
		`{"a":1} null {"b":2}`,
		`{"a":1} 5`,
		"{\"a\":1}\n---\nb: 2\n",
		`{"a":}`,
		`{"a":1`,
		`{"a":"\u00e9\n"}`,
		"kind: ConfigMap\n",
		"",
	} {
		var fast, generic []string
		fastErr := splitManifestStream(bytes.NewReader([]byte(out)), func(doc []byte) error { fast = append(fast, string(doc)); return nil })
		genericErr := splitManifestStream(onlyReader{bytes.NewReader([]byte(out))}, func(doc []byte) error { generic = append(generic, string(doc)); return nil })
		if (fastErr == nil) != (genericErr == nil) || fmt.Sprint(fast) != fmt.Sprint(generic) {
			t.Errorf("%q: %q (%v), the decoder gives %q (%v)", out, fast, fastErr, generic, genericErr)
		}
	}
}
