package helmplugin

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/params"
	"github.com/cmp-injector/cmp-injector/test/golden"
)

func TestAnnounceGolden(t *testing.T) {
	for _, chart := range []string{"typed", "echo"} {
		t.Run(chart, func(t *testing.T) {
			out, stderr, err := runPlugin(t, announceParameters, chartDir(t, chart), "", baseEnv(t))
			if err != nil {
				t.Fatalf("announce: %v (%s)", err, stderr)
			}
			if stderr != "" {
				t.Errorf("unexpected stderr: %s", stderr)
			}
			if _, err := params.ParseAnnouncements([]byte(out)); err != nil {
				t.Errorf("the plugin server would not accept the announcement: %v", err)
			}
			golden.Check(t, filepath.Join("testdata", chart+".parameters.json"), []byte(out))
		})
	}
}

// TestAnnouncementRoundTrip sends the whole announcement back unchanged, as a UI that
// saves every map would; the chart must render exactly as with no parameters, so no
// value changes type or text even though typed leaves are in two maps.
func TestAnnouncementRoundTrip(t *testing.T) {
	for _, chart := range []string{"typed", "echo"} {
		t.Run(chart, func(t *testing.T) {
			dir := chartDir(t, chart)
			announced := announcedMaps(t, dir)
			var back []params.AppParameter
			for _, name := range slices.Sorted(maps.Keys(announced)) {
				back = append(back, params.AppParameter{Name: name, Map: announced[name]})
			}
			plain, _, err := runPlugin(t, generateManifests, dir, "", baseEnv(t))
			if err != nil {
				t.Fatal(err)
			}
			got, stderr, err := runPlugin(t, generateManifests, dir, "", withParams(t, baseEnv(t), back))
			if err != nil {
				t.Fatalf("generate with the announced values: %v (%s)", err, stderr)
			}
			if got != plain {
				t.Errorf("announced values sent back change the output\n--- with\n%s\n--- without\n%s", got, plain)
			}
		})
	}
}

// TestAnnouncedParametersAloneThroughSet documents the caveat --set brings, which
// Argo CD's native Helm shares: sent back through --set alone, helm-parameters keeps
// every leaf except those --set types differently, and each of those is announced
// again in helm-string-parameters or helm-number-parameters, which restore it.
func TestAnnouncedParametersAloneThroughSet(t *testing.T) {
	dir := chartDir(t, "typed")
	announced := announcedMaps(t, dir)
	if len(announced[paramHelmParameters]) != 24 {
		t.Errorf("helm-parameters has %d leaves, want all 24 of values.yaml: %v", len(announced[paramHelmParameters]), announced[paramHelmParameters])
	}
	plain, _, err := runPlugin(t, generateManifests, dir, "", baseEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	back := []params.AppParameter{{Name: paramHelmParameters, Map: announced[paramHelmParameters]}}
	// values.schema.json declares image.tag a string, so helm refuses the retyped "10".
	if _, _, err := runPlugin(t, generateManifests, dir, "", withParams(t, baseEnv(t), back)); err == nil || !strings.Contains(err.Error(), "/image/tag") {
		t.Errorf("error = %v, want the schema to refuse image.tag retyped by --set", err)
	}
	back = append(back, params.AppParameter{Name: paramSkipSchemaValidation, String: str("true")})
	got, stderr, err := runPlugin(t, generateManifests, dir, "", withParams(t, baseEnv(t), back))
	if err != nil {
		t.Fatalf("generate: %v (%s)", err, stderr)
	}
	before, after := renderedLeaves(t, plain), renderedLeaves(t, got)
	var changed []string
	for _, k := range slices.Sorted(maps.Keys(before)) {
		if after[k] == before[k] {
			continue
		}
		changed = append(changed, k)
		_, str := announced[paramHelmStringParameters][k]
		_, num := announced[paramHelmNumberParameters][k]
		if !str && !num {
			t.Errorf("%s: --set turned %+v into %+v, and no typed map announces it", k, before[k], after[k])
		}
	}
	// "10" becomes the integer 10 and 0.75 the string "0.75": the caveat is real.
	if want := []string{"image.tag", "podAnnotations.prometheus\\.io/port", "podAnnotations.prometheus\\.io/scrape", "port", "ratio"}; !reflect.DeepEqual(changed, want) {
		t.Errorf("leaves retyped by --set = %q, want %q", changed, want)
	}
}

// announcedMaps runs the announcement for dir and returns its maps by name.
func announcedMaps(t *testing.T, dir string) map[string]map[string]string {
	t.Helper()
	out, stderr, err := runPlugin(t, announceParameters, dir, "", baseEnv(t))
	if err != nil {
		t.Fatalf("announce: %v (%s)", err, stderr)
	}
	var list []params.Announcement
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	maps := map[string]map[string]string{}
	for _, a := range list {
		if a.CollectionType == params.CollectionMap {
			maps[a.Name] = a.Map
		}
	}
	return maps
}

// renderedLeaves flattens the values a chart rendered into its values.json, keeping
// each leaf's type next to its text.
func renderedLeaves(t *testing.T, manifests string) map[string]typedText {
	t.Helper()
	doc, err := json.Marshal(renderedValues(t, manifests))
	if err != nil {
		t.Fatal(err)
	}
	vals, err := decodeValues(doc)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]typedText{}
	for _, l := range flatten(vals, nil, nil) {
		out[l.path.String()] = typedText{l.value, l.typ}
	}
	return out
}

type typedText struct {
	value string
	typ   leafType
}

func TestAnnounceFollowsSelectedValuesFiles(t *testing.T) {
	env := withParams(t, baseEnv(t), []params.AppParameter{{Name: "values-files", Array: []string{"values-prod.yaml", "values-extra.yml"}}})
	out, _, err := runPlugin(t, announceParameters, chartDir(t, "echo"), "", env)
	if err != nil {
		t.Fatal(err)
	}
	var list []params.Announcement
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	maps := map[string]map[string]string{}
	for _, a := range list {
		maps[a.Name] = a.Map
	}
	if got := maps[paramHelmNumberParameters]["replicas"]; got != "3" {
		t.Errorf("replicas = %q, want 3 from values-prod.yaml", got)
	}
	if got := maps[paramHelmParameters]["extra"]; got != "from-values-extra" {
		t.Errorf("extra = %q, want it from values-extra.yml", got)
	}
	if got := maps[paramHelmParameters]["image.tag"]; got != "1.26" {
		t.Errorf("image.tag = %q, want 1.26", got)
	}
}

func TestAnnounceErrors(t *testing.T) {
	env := withParams(t, baseEnv(t), []params.AppParameter{{Name: "values-files", Array: []string{"../typed/values.yaml"}}})
	if _, _, err := runPlugin(t, announceParameters, chartDir(t, "echo"), "", env); err == nil || !strings.Contains(err.Error(), "outside the repository") {
		t.Errorf("error = %v, want the escape refused", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "values.yaml"), []byte("- a list\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runPlugin(t, announceParameters, dir, "", baseEnv(t)); err == nil || !strings.Contains(err.Error(), "not a map") {
		t.Errorf("error = %v, want a clear error for a non-map values.yaml", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "values.yaml"), []byte("a: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "values.schema.json"), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runPlugin(t, announceParameters, dir, "", baseEnv(t))
	if err != nil || !strings.Contains(stderr, "values.schema.json ignored") || !strings.Contains(out, `"a": "1"`) {
		t.Errorf("a broken schema should only warn: err=%v stderr=%q out=%s", err, stderr, out)
	}
}
