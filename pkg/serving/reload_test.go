package serving_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/serving"
	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
)

// TestPollerSeesKubeletSwapAndEdits: a projected file changes by a ..data
// symlink swap, an authored file by an edit in place; both are seen once, a
// missing file is reported once however often it is polled.
func TestPollerSeesKubeletSwapAndEdits(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plugin.yaml")
	var changes, failures int
	p := &serving.Poller{Fingerprint: serving.FileHash(file), OnChange: func(_ string, err error) {
		if err != nil {
			failures++
			return
		}
		changes++
	}}
	for _, content := range []string{"a", "b"} {
		if err := servingtest.WriteProjected(dir, map[string][]byte{"plugin.yaml": []byte(content)}); err != nil {
			t.Fatal(err)
		}
		if !p.Check() || p.Check() {
			t.Fatalf("content %q: want exactly one change", content)
		}
	}
	if target, err := os.Readlink(file); err != nil || target != filepath.Join("..data", "plugin.yaml") {
		t.Errorf("plugin.yaml is not a link through ..data: %q %v", target, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 { // ..data, one timestamped dir, plugin.yaml
		t.Errorf("the old timestamped dir was not removed: %v", entries)
	}
	if err := servingtest.WriteProjected(dir, map[string][]byte{"other": []byte("x")}); err != nil {
		t.Fatal(err)
	}
	p.Check()
	p.Check()
	if failures != 1 {
		t.Errorf("a missing file was reported %d times", failures)
	}
	if err := os.Remove(filepath.Join(dir, "other")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("c"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !p.Check() || changes != 3 {
		t.Errorf("an edit in place after the failure: %d changes", changes)
	}
}

func TestTreeStatSeesNewFilesAndSkips(t *testing.T) {
	dir := t.TempDir()
	fp := serving.TreeStat(dir, ".git")
	before, err := fp()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	skippedOnly, _ := fp()
	if err := os.WriteFile(filepath.Join(dir, ".git", "HEAD"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if after, _ := fp(); after != skippedOnly {
		t.Error("a file under a skipped dir changed the fingerprint")
	}
	if err := os.WriteFile(filepath.Join(dir, "values.yaml"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if after, _ := fp(); after == before || after == skippedOnly {
		t.Error("a new file did not change the fingerprint")
	}
}

// TestPollerReportsRecoveryWithSameContent: a file that vanishes for a moment
// and comes back unchanged was reported as failed, so its return is reported
// too; without it the catalog health metric the failure set stayed 0.
func TestPollerReportsRecoveryWithSameContent(t *testing.T) {
	file := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(file, []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	var calls []string
	p := &serving.Poller{Fingerprint: serving.FileHash(file), OnChange: func(fp string, err error) {
		if err != nil {
			calls = append(calls, "error")
			return
		}
		calls = append(calls, fp)
	}}
	p.Prime()
	if p.Check() {
		t.Fatal("an unchanged file after Prime was reported")
	}
	if err := os.Rename(file, file+".away"); err != nil {
		t.Fatal(err)
	}
	if !p.Check() {
		t.Fatal("the missing file was not reported")
	}
	if err := os.Rename(file+".away", file); err != nil {
		t.Fatal(err)
	}
	if !p.Check() {
		t.Fatal("the file back with the same content was not reported")
	}
	if p.Check() {
		t.Error("the unchanged file was reported again")
	}
	want, _ := serving.FileHash(file)()
	if len(calls) != 2 || calls[0] != "error" || calls[1] != want {
		t.Errorf("OnChange calls %v, want [error %s]", calls, want)
	}
}
