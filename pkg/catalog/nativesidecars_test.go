package catalog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func withNativeSidecars(t *testing.T, value string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if value == "" {
		return b
	}
	out := strings.Replace(string(b), "defaults:\n", "defaults:\n  nativeSidecars: "+value+"\n", 1)
	if out == string(b) {
		t.Fatal("testdata/example.yaml has no defaults")
	}
	return []byte(out)
}

// defaults.nativeSidecars takes the booleans catalogs have always held, their
// strings, and auto; auto is settled by the resolver the loader passes, and
// without one (the offline commands) it is native, saying so.
func TestNativeSidecarsSetting(t *testing.T) {
	classic := func(string) (bool, string, error) { return false, "the API server refused it", nil }
	for _, c := range []struct {
		value    string
		resolver NativeSidecarsResolver
		native   bool
		auto     bool
		reason   string
	}{
		{"", classic, true, false, ""},
		{"true", classic, true, false, ""},
		{"false", nil, false, false, ""},
		{`"true"`, classic, true, false, ""},
		{`"false"`, nil, false, false, ""},
		{"auto", nil, true, true, offlineAutoReason},
		{`"auto"`, classic, false, true, "the API server refused it"},
	} {
		cat, err := ParseWith(withNativeSidecars(t, c.value), Options{NativeSidecars: c.resolver})
		if err != nil {
			t.Errorf("nativeSidecars: %s: %v", c.value, err)
			continue
		}
		d := cat.Defaults
		if d.NativeSidecars != c.native || d.NativeSidecarsAuto != c.auto || d.NativeSidecarsReason != c.reason {
			t.Errorf("nativeSidecars: %s: native=%v auto=%v reason=%q, want %v %v %q",
				c.value, d.NativeSidecars, d.NativeSidecarsAuto, d.NativeSidecarsReason, c.native, c.auto, c.reason)
		}
	}
	_, err := Parse(withNativeSidecars(t, "sometimes"))
	if err == nil || !strings.Contains(err.Error(), `must be true, false or "auto"`) {
		t.Errorf("nativeSidecars: sometimes: %v", err)
	}
}

// The resolver is asked only about a catalog that is otherwise valid, with its
// copy image; its error fails the load as an unresolvedError.
func TestNativeSidecarsResolver(t *testing.T) {
	var asked []string
	failing := func(image string) (bool, string, error) {
		asked = append(asked, image)
		return false, "", errors.New("pods is forbidden")
	}
	_, err := ParseWith(withNativeSidecars(t, "auto"), Options{NativeSidecars: failing})
	var ue *unresolvedError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "defaults.nativeSidecars: auto: pods is forbidden") {
		t.Errorf("err = %v, want an unresolvedError", err)
	}
	if len(asked) != 1 || asked[0] != "ghcr.io/cmp-injector/cmp-server:v0.1.0" {
		t.Errorf("resolver asked with %q, want the copy image once", asked)
	}
	bad := strings.Replace(string(withNativeSidecars(t, "auto")), "image: alpine/helm:3.16.2", "image: ''", 1)
	asked = nil
	if _, err := ParseWith([]byte(bad), Options{NativeSidecars: failing}); err == nil || errors.As(err, &ue) || len(asked) != 0 {
		t.Errorf("an invalid catalog: err %v, resolver asked %d times; want a validation error and no call", err, len(asked))
	}
}

// The setting writes back as it was read: booleans stay booleans (adopt writes
// catalogs), auto a string.
func TestNativeSidecarsSettingRoundTrip(t *testing.T) {
	for _, s := range []NativeSidecarsSetting{NativeSidecarsOn, NativeSidecarsOff, NativeSidecarsAuto} {
		y, err := yaml.Marshal(Defaults{NativeSidecars: s})
		if err != nil {
			t.Fatal(err)
		}
		var back Defaults
		if err := yaml.Unmarshal(y, &back); err != nil || back.NativeSidecars != s {
			t.Errorf("%s: wrote %s, read %q (%v)", s, y, back.NativeSidecars, err)
		}
		if s != NativeSidecarsAuto && strings.Contains(string(y), `"`) {
			t.Errorf("%s written as a string: %s", s, y)
		}
	}
	if y, _ := yaml.Marshal(Defaults{}); strings.Contains(string(y), "nativeSidecars") {
		t.Errorf("unset written: %s", y)
	}
}

// A Watcher tries again content whose auto the cluster did not settle, and
// does not retry content that is invalid.
func TestWatcherRetriesUnresolved(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(path, withNativeSidecars(t, "auto"), 0o644); err != nil {
		t.Fatal(err)
	}
	answer := errors.New("connection refused")
	calls := 0
	w := NewWatcher(path, Options{NativeSidecars: func(string) (bool, string, error) {
		calls++
		return true, "accepted", answer
	}}, Hooks{})
	if _, err := w.Reload(); err == nil {
		t.Fatal("first reload: no error")
	}
	answer = nil
	changed, err := w.Reload()
	if err != nil || !changed || calls != 2 || w.Current() == nil || w.Current().Defaults.NativeSidecarsReason != "accepted" {
		t.Errorf("second reload of the same content: changed=%v err=%v calls=%d", changed, err, calls)
	}
}
