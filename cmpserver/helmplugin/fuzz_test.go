package helmplugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cmp-injector/cmp-injector/pkg/params"
)

// helmReadValue reads a --set value the way helm's strvals parser does (a backslash
// makes the next rune literal, an unescaped comma ends the value, a leading `{`
// starts a list) and reports whether the whole input was one literal value.
func helmReadValue(s string) (string, bool) {
	if strings.HasPrefix(s, "{") {
		return "", false
	}
	var b strings.Builder
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		switch rs[i] {
		case ',':
			return "", false
		case '\\':
			if i+1 == len(rs) {
				return "", false
			}
			i++
		}
		b.WriteRune(rs[i])
	}
	return b.String(), true
}

// unescaped lists the runes of s not preceded by a backslash escape.
func unescaped(s string) []rune {
	var out []rune
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		if rs[i] == '\\' {
			i++
			continue
		}
		out = append(out, rs[i])
	}
	return out
}

func FuzzSetValue(f *testing.F) {
	f.Fuzz(func(t *testing.T, v string) {
		if !utf8.ValidString(v) {
			return // parameters arrive as JSON strings, always valid UTF-8
		}
		got, ok := helmReadValue(escapeSetValue(v))
		if !ok || got != v {
			t.Fatalf("escapeSetValue(%q) = %q reads back as %q (whole value: %v)", v, escapeSetValue(v), got, ok)
		}
	})
}

func FuzzSetPath(f *testing.F) {
	f.Fuzz(func(t *testing.T, key string) {
		if !utf8.ValidString(key) {
			return
		}
		p, err := parseSetPath(key)
		if err != nil {
			return
		}
		canon := p.String()
		again, err := parseSetPath(canon)
		if err != nil || !reflect.DeepEqual(again, p) {
			t.Fatalf("%q -> %q does not parse back to the same path: %v %#v", key, canon, err, again)
		}
		for _, r := range unescaped(canon) {
			if r == '=' || r == ',' {
				t.Fatalf("canonical key %q holds an unescaped %q", canon, r)
			}
		}
	})
}

func FuzzFlatten(f *testing.F) {
	f.Fuzz(func(t *testing.T, doc []byte) {
		vals, err := decodeValues(doc)
		if err != nil {
			return
		}
		for _, l := range flatten(vals, nil, nil) {
			p, err := parseSetPath(l.path.String())
			if err != nil || !reflect.DeepEqual(p, l.path) {
				t.Fatalf("leaf key %q does not parse back: %v", l.path.String(), err)
			}
			if got := lookup(vals, l.path); !reflect.DeepEqual(got, leafValue(l)) {
				t.Fatalf("leaf %q = %#v, but the document holds %#v there", l.path.String(), leafValue(l), got)
			}
		}
	})
}

func lookup(v any, p setPath) any {
	for _, s := range p {
		if s.isIndex {
			v = v.([]any)[s.index]
		} else {
			v = v.(map[string]any)[s.name]
		}
	}
	if n, ok := v.(json.Number); ok {
		return n.String()
	}
	if b, ok := v.(bool); ok {
		return strconv.FormatBool(b)
	}
	return v
}

func leafValue(l leaf) any {
	if l.typ == leafNull {
		return nil
	}
	return l.value
}

// corpusStrings reads the string arguments of a fuzz target's seed corpus.
func corpusStrings(t *testing.T, target string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", target, "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no seed corpus for %s: %v", target, err)
	}
	var out []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if arg, ok := strings.CutPrefix(line, "string("); ok {
				s, err := strconv.Unquote(strings.TrimSuffix(arg, ")"))
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				out = append(out, s)
			}
		}
	}
	return out
}

// TestSetValueCorpusThroughHelm sends the FuzzSetValue seeds to the real helm, so
// the model helmReadValue is checked against helm itself.
func TestSetValueCorpusThroughHelm(t *testing.T) {
	m := map[string]string{}
	for i, v := range corpusStrings(t, "FuzzSetValue") {
		if !strings.ContainsRune(v, 0) {
			m["v"+strconv.Itoa(i)] = v
		}
	}
	env := withParams(t, baseEnv(t), []params.AppParameter{{Name: "helm-string-parameters", Map: m}})
	out, stderr, err := runPlugin(t, generateManifests, chartDir(t, "echo"), "", env)
	if err != nil {
		t.Fatalf("%v (%s)", err, stderr)
	}
	vals := renderedValues(t, out)
	for k, want := range m {
		if vals[k] != want {
			t.Errorf("%s: helm saw %#v, want %q", k, vals[k], want)
		}
	}
}
