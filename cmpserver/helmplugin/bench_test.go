package helmplugin

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkAnnouncement measures decoding, flattening and splitting a values.yaml
// of the typed fixture, the work of `cmp-server helm parameters` besides I/O.
func BenchmarkAnnouncement(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("testdata", "charts", "typed", "values.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		vals, err := decodeValues(data)
		if err != nil {
			b.Fatal(err)
		}
		announcement(nil, flatten(vals, nil, nil), nil)
	}
}

// BenchmarkTemplateArgs measures building the helm argv for 1000 --set values.
func BenchmarkTemplateArgs(b *testing.B) {
	o := &helmOptions{Set: map[string]string{}, ReleaseName: "r"}
	for i := range 1000 {
		o.Set["a.b["+strconv.Itoa(i)+"].c"] = "v,with\\specials{" + strconv.Itoa(i)
	}
	bd, err := newBoundary(".", "")
	if err != nil {
		b.Fatal(err)
	}
	tmp := b.TempDir()
	for b.Loop() {
		if _, _, err := templateArgs(o, bd, tmp, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}
