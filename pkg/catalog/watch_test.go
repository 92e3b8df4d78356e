package catalog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWatcherRecoversAfterReadError: the file unreadable for a moment and back
// with the catalog in use ends the failure (Recovered) without reinstalling
// it; an invalid version back after a read error is reported again.
func TestWatcherRecoversAfterReadError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "catalog.yaml")
	good, err := os.ReadFile("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	w := NewWatcher(file, Options{}, Hooks{
		Loaded:    func(*Catalog) { events = append(events, "loaded") },
		Failed:    func(error) { events = append(events, "failed") },
		Recovered: func(c *Catalog) { events = append(events, "recovered "+c.Revision) },
	})
	write := func(content []byte) {
		t.Helper()
		if err := os.WriteFile(file, content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hide := func() {
		t.Helper()
		if err := os.Remove(file); err != nil {
			t.Fatal(err)
		}
	}
	write(good)
	if changed, err := w.Reload(); !changed || err != nil {
		t.Fatalf("initial load: %v %v", changed, err)
	}
	first := w.Current()
	hide()
	if _, err := w.Reload(); err == nil {
		t.Fatal("a missing file read without error")
	}
	write(good)
	if changed, err := w.Reload(); changed || err != nil {
		t.Errorf("same content back: changed %v, err %v", changed, err)
	}
	if changed, err := w.Reload(); changed || err != nil {
		t.Errorf("unchanged: %v %v", changed, err)
	}
	if w.Current() != first {
		t.Error("the catalog in use was reinstalled")
	}
	// A bad version, a read error, the same bad version: still failing, and
	// said so again because the read error was the last thing reported.
	write([]byte("apiVersion: nope\n"))
	_, _ = w.Reload()
	hide()
	_, _ = w.Reload()
	write([]byte("apiVersion: nope\n"))
	if _, err := w.Reload(); err == nil {
		t.Error("the bad version back after a read error was accepted")
	}
	want := []string{"loaded", "failed", "recovered " + first.Revision, "failed", "failed", "failed"}
	if strings.Join(events, ",") != strings.Join(want, ",") {
		t.Errorf("hooks called %v, want %v", events, want)
	}
}
