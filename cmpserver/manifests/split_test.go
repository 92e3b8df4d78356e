package manifests

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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

// response keeps the documents as the gRPC response does (cmpserver's
// encodedManifests): a copy of each, and a document of 1 MiB or more adopted
// instead of copied.
type response struct {
	docs  [][]byte
	size  int
	count int
}

func (m *response) Add(doc []byte) error {
	m.docs = append(m.docs, append([]byte(nil), doc...))
	m.size += len(doc)
	m.count++
	return nil
}

func (m *response) Adopt(doc []byte) bool {
	if len(doc) < 1<<20 {
		return false
	}
	m.docs = append(m.docs, doc)
	m.size += len(doc)
	m.count++
	return true
}

// splitManifests is Split collected into strings.
func splitManifests(out []byte) ([]string, error) {
	var manifests []string
	err := Split(bytes.NewReader(out), SinkFunc(func(doc []byte) error {
		manifests = append(manifests, string(doc))
		return nil
	}))
	return manifests, err
}

// splitAllocs splits doc from a file into a response, as GenerateManifest
// does, and returns the bytes allocated meanwhile.
func splitAllocs(t *testing.T, doc []byte) (allocated uint64, m *response) {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(doc); err != nil || func() error { _, err := f.Seek(0, 0); return err }() != nil {
		t.Fatal(err)
	}
	m = &response{}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	// The stdout spool's reader (spool.reader).
	if err := Split(io.NewSectionReader(f, 0, int64(len(doc))), m); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, m
}

// TestLargeDocumentMemory: one large JSON document costs at most about twice
// its size to split (the response holds it once; it cost 8 ×), and one large
// YAML document at most 7 × (it cost 26 ×; go-yaml's own scanner allocates
// about 4 × in short-lived buffers, yamlstream.go). Bytes allocated bound the
// peak from above, and do not depend on when the garbage collector runs;
// BenchmarkSplitMemory measures the peak.
func TestLargeDocumentMemory(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		name := map[bool]string{false: "yaml", true: "json"}[asJSON]
		size := 40 << 20
		if testing.Short() && !asJSON {
			size = 8 << 20 // go-yaml takes seconds
		}
		limit := map[bool]float64{false: 7, true: 3}[asJSON]
		t.Run(name, func(t *testing.T) {
			doc := bigDocument(size, asJSON)
			allocated, m := splitAllocs(t, doc)
			if m.count != 1 {
				t.Fatalf("%d manifests, want 1", m.count)
			}
			ratio := float64(allocated) / float64(len(doc))
			t.Logf("%s document of %.1f MiB: %.1f MiB allocated while split (%.2f × its size), response %.1f MiB",
				name, float64(len(doc))/(1<<20), float64(allocated)/(1<<20), ratio, float64(m.size)/(1<<20))
			// The margin is for what other goroutines of the test binary
			// allocate meanwhile (TotalAlloc is the process's).
			if ratio > limit {
				t.Errorf("%.2f × the document's size allocated, want at most %.0f ×", ratio, limit)
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
		fastErr := Split(bytes.NewReader([]byte(out)), SinkFunc(func(doc []byte) error { fast = append(fast, string(doc)); return nil }))
		genericErr := Split(onlyReader{bytes.NewReader([]byte(out))}, SinkFunc(func(doc []byte) error { generic = append(generic, string(doc)); return nil }))
		if (fastErr == nil) != (genericErr == nil) || fmt.Sprint(fast) != fmt.Sprint(generic) {
			t.Errorf("%q: %q (%v), the decoder gives %q (%v)", out, fast, fastErr, generic, genericErr)
		}
	}
}

// smallDocuments is about size bytes of YAML in documents of about 10 KB.
func smallDocuments(size int) []byte {
	var b bytes.Buffer
	value := strings.Repeat("x", 1000)
	for n := 0; b.Len() < size; n++ {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm%d\ndata:\n", n)
		for i := 0; i < 10; i++ {
			fmt.Fprintf(&b, "  k%d: %s\n", i, value)
		}
	}
	return b.Bytes()
}

// heapPeak runs f and returns the most heap held by live and not yet
// collected objects meanwhile, above what was held before, sampled every
// 100 µs (runtime/metrics, which does not stop the world), and the bytes
// allocated.
func heapPeak(f func()) (peak, allocated uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/allocs:bytes"}}
	read := func() (uint64, uint64) {
		metrics.Read(sample)
		return sample[0].Value.Uint64(), sample[1].Value.Uint64()
	}
	runtime.GC()
	base, allocBase := read()
	var high atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Microsecond)
		defer tick.Stop()
		for {
			if h, _ := read(); h > high.Load() {
				high.Store(h)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(stop)
	<-done
	h, allocs := read()
	peak = max(high.Load(), h)
	return peak - min(peak, base), allocs - allocBase
}

// BenchmarkSplitMemory splits one 60 MB YAML document and 60 MB of 10 KB
// YAML documents from a file, as GenerateManifest does, through the fast
// path and through Kubernetes' decoder alone, and reports the peak heap and
// the bytes allocated as multiples of the output's size:
//
//	go test -run '^$' -bench SplitMemory -benchtime 1x ./cmpserver/
func BenchmarkSplitMemory(b *testing.B) {
	inputs := []struct {
		name string
		out  []byte
	}{
		{"one-60MB-document", bigDocument(60<<20, false)},
		{"60MB-of-10KB-documents", smallDocuments(60 << 20)},
	}
	paths := []struct {
		name  string
		split func(r io.Reader, m *response) error
	}{
		{"decoder", func(r io.Reader, m *response) error { return splitDecoded(r, m.Add) }},
		{"fast", func(r io.Reader, m *response) error { return Split(r, m) }},
	}
	for _, in := range inputs {
		path := filepath.Join(b.TempDir(), "out")
		if err := os.WriteFile(path, in.out, 0o600); err != nil {
			b.Fatal(err)
		}
		for _, p := range paths {
			b.Run(in.name+"/"+p.name, func(b *testing.B) {
				f, err := os.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				var peak, allocated uint64
				for b.Loop() {
					m := &response{}
					peak, allocated = heapPeak(func() {
						if err := p.split(io.NewSectionReader(f, 0, int64(len(in.out))), m); err != nil {
							b.Fatal(err)
						}
					})
				}
				size := float64(len(in.out))
				b.ReportMetric(float64(peak)/(1<<20), "peakheap-MiB")
				b.ReportMetric(float64(peak)/size, "peak-x")
				b.ReportMetric(float64(allocated)/size, "alloc-x")
			})
		}
	}
}

func TestSplitManifests(t *testing.T) {
	// YAML stream: converted to JSON; comment-only and null documents dropped.
	got, err := splitManifests([]byte("---\n# comment only\n---\na: 1\n---\nnull\n---\n\nb: [x]\n"))
	if want := []string{`{"a":1}`, `{"b":["x"]}`}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("YAML stream = %q, %v", got, err)
	}
	// JSON stream: values kept as printed, null dropped.
	got, err = splitManifests([]byte("{\"a\": 1}\nnull\n{\"b\":2}\n"))
	if want := []string{`{"a": 1}`, `{"b":2}`}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("JSON stream = %q, %v", got, err)
	}
	if _, err := splitManifests([]byte("a: [\n")); err == nil || !strings.Contains(err.Error(), "failed to unmarshal manifest") {
		t.Errorf("bad YAML: %v", err)
	}
	if got, err := splitManifests(nil); err != nil || len(got) != 0 {
		t.Errorf("empty output = %q, %v", got, err)
	}
}
