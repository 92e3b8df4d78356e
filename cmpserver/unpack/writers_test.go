package unpack

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cmp-injector/cmp-injector/cmpserver/unpack/tartest"
)

// TestWriterBufClasses: a queued file holds the smallest pooled size that
// fits it, not parallelMax.
func TestWriterBufClasses(t *testing.T) {
	for size, want := range map[int]int{0: 4 << 10, 1: 4 << 10, 4 << 10: 4 << 10, 4<<10 + 1: 16 << 10, 10000: 16 << 10, 16 << 10: 16 << 10, 16<<10 + 1: parallelMax, parallelMax: parallelMax} {
		if got := writerBufSizes[writerBufClass(size)]; got != want {
			t.Errorf("a %d-byte file takes a %d-byte buffer, want %d", size, got, want)
		}
	}
}

// TestWriterBudget: files are queued while the budget lasts; one that would
// exceed it is refused without reading its body (the extraction writes it
// itself), and written files give their bytes back.
func TestWriterBudget(t *testing.T) {
	dir := t.TempDir()
	budget := newByteBudget(24 << 10)
	// No worker yet: queued files stay queued, holding their buffers.
	w := &fileWriters{budget: budget, jobs: make(chan writeJob, writerQueue)}
	submit := func(name string, size int) (bool, *bytes.Reader) {
		t.Helper()
		body := bytes.NewReader(bytes.Repeat([]byte(name[:1]), size))
		n, queued, err := w.submit(filepath.Join(dir, name), name, 0o644, false, body, size)
		if err != nil {
			t.Fatal(err)
		}
		if queued && n != size {
			t.Fatalf("%s: queued %d bytes, want %d", name, n, size)
		}
		return queued, body
	}
	for _, tc := range []struct {
		name   string
		size   int
		queued bool
	}{
		{"a", 1000, true},    // 4 KiB held
		{"b", 10000, true},   // + 16 KiB: 20 KiB
		{"c", 10000, false},  // + 16 KiB would be 36 KiB
		{"d", 4 << 10, true}, // + 4 KiB: 24 KiB
		{"e", 1, false},      // spent
	} {
		queued, body := submit(tc.name, tc.size)
		if queued != tc.queued {
			t.Fatalf("%s (%d bytes): queued %v, want %v (held %d of %d)", tc.name, tc.size, queued, tc.queued, budget.held.Load(), budget.max)
		}
		if !queued && body.Len() != tc.size {
			t.Fatalf("%s: %d bytes of the refused file were read", tc.name, tc.size-body.Len())
		}
	}
	w.workers.Add(1)
	go w.run()
	if err := w.close(); err != nil {
		t.Fatal(err)
	}
	if held := budget.held.Load(); held != 0 {
		t.Fatalf("%d bytes still held after every queued file was written", held)
	}
	for name, size := range map[string]int{"a": 1000, "b": 10000, "d": 4 << 10} {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || len(got) != size || strings.Trim(string(got), name) != "" {
			t.Errorf("%s: %d bytes, %v", name, len(got), err)
		}
	}
}

// TestExtractWithBudgetSpent: with no budget left every small file is
// written by the extraction itself, and the tree is the same.
func TestExtractWithBudgetSpent(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one core: there are no writers")
	}
	entries := []tartest.Entry{tartest.Dir(".")}
	for i := range 50 {
		entries = append(entries, tartest.File(fmt.Sprintf("f%02d", i), strings.Repeat("x", i*100)))
	}
	tgz := tartest.Tgz(t, entries...)
	for _, budget := range []int64{0, writerBudget} {
		dest := t.TempDir()
		if err := extractTgzWith(bytes.NewReader(tgz), dest, extractOptions{limits: DefaultLimits(), budget: newByteBudget(budget)}); err != nil {
			t.Fatalf("budget %d: %v", budget, err)
		}
		for i := range 50 {
			got, err := os.ReadFile(filepath.Join(dest, fmt.Sprintf("f%02d", i)))
			if err != nil || string(got) != strings.Repeat("x", i*100) {
				t.Fatalf("budget %d: f%02d: %d bytes, %v", budget, i, len(got), err)
			}
		}
	}
}
