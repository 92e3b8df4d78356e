package injector

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
)

// slimPod decodes exactly inject.PodFields: a field the list gains and the
// decoder lacks would be read as empty by the webhook, and one the decoder
// keeps beyond the list is work for nothing.
func TestSlimPodDecodesPodFields(t *testing.T) {
	got := slimFields(reflect.TypeOf(slimPod{}), "")
	want := slices.Clone(inject.PodFields)
	sort.Strings(got)
	sort.Strings(want)
	for _, f := range want {
		if !slices.Contains(got, f) {
			t.Errorf("inject.PodFields has %s, which slimPod does not decode", f)
		}
	}
	for _, f := range got {
		if !slices.Contains(want, f) {
			t.Errorf("slimPod decodes %s, which is not in inject.PodFields", f)
		}
	}
}

// slimFields lists what a decoder type reads, in PodFields' notation.
func slimFields(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		p := name
		if prefix != "" {
			p = prefix + "." + name
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft == reflect.TypeOf(jsonSpan{}):
			out = append(out, p) // kept whole, decoded when needed
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			if ft.Elem().NumField() == 0 {
				out = append(out, p+"[]")
			} else {
				out = append(out, slimFields(ft.Elem(), p+"[]")...)
			}
		case ft.Kind() == reflect.Struct:
			out = append(out, slimFields(ft, p)...)
		default:
			out = append(out, p)
		}
	}
	return out
}

// Every golden case decides the same with its pod cut down to
// inject.PodFields as it does with the whole pod. When a decision starts
// reading a field the webhook does not decode, the case that sets it fails
// here, naming the field.
func TestGoldenPodsReadOnlyPodFields(t *testing.T) {
	cases, _ := goldenCases(t)
	fields := map[string]bool{}
	for _, f := range inject.PodFields {
		fields[f] = true
	}
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			cat, err := catalog.Load(goldenCatalogFile(name))
			if err != nil {
				t.Fatal(err)
			}
			input, err := os.ReadFile(filepath.Join(goldenDir, name+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			var whole map[string]any
			if err := json.Unmarshal(podOf(t, input), &whole); err != nil {
				t.Fatal(err)
			}
			ns := namespaceOf(t, input)
			want := decideJSON(t, whole, ns, cat)
			var dropped []string
			cut := prune(whole, "", "", fields, &dropped).(map[string]any)
			if got := decideJSON(t, cut, ns, cat); got == want {
				return
			}
			// Name the fields: each dropped alone changes the answer.
			for _, p := range dropped {
				if decideJSON(t, without(whole, "", p).(map[string]any), ns, cat) != want {
					t.Errorf("the decision reads %s, which inject.PodFields (and the webhook's slimPod) leave out", p)
				}
			}
			if !t.Failed() {
				t.Errorf("the decision differs with the pod cut down to inject.PodFields, though no single dropped field changes it (dropped: %s)", strings.Join(dropped, ", "))
			}
		})
	}
}

// decideJSON is the offline decision for the pod obj, as comparable text.
func decideJSON(t *testing.T, obj map[string]any, ns string, cat *catalog.Catalog) string {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := json.Unmarshal(b, &pod); err != nil {
		t.Fatal(err)
	}
	r := inject.Inject(&pod, ns, cat)
	out, err := json.Marshal(struct {
		*inject.Report
		Patch string
	}{r, string(r.Patch)})
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// prune copies v keeping what fields cover. generic is v's path in
// PodFields' notation, concrete its path with indexes; each field left out is
// added to dropped by its concrete path.
func prune(v any, generic, concrete string, fields map[string]bool, dropped *[]string) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, child := range x {
			g, c := joinPath(generic, k), joinPath(concrete, k)
			switch {
			case fields[g]:
				out[k] = child
			case covers(fields, g):
				out[k] = prune(child, g, c, fields, dropped)
			default:
				*dropped = append(*dropped, c)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, el := range x {
			out[i] = prune(el, generic+"[]", concrete+"["+strconv.Itoa(i)+"]", fields, dropped)
		}
		return out
	}
	return v
}

// without copies v without the field at the concrete path target.
func without(v any, concrete, target string) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, child := range x {
			if c := joinPath(concrete, k); c != target {
				out[k] = without(child, c, target)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, el := range x {
			out[i] = without(el, concrete+"["+strconv.Itoa(i)+"]", target)
		}
		return out
	}
	return v
}

func joinPath(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

// covers says whether a field below g is in fields.
func covers(fields map[string]bool, g string) bool {
	for f := range fields {
		if strings.HasPrefix(f, g+".") || strings.HasPrefix(f, g+"[]") {
			return true
		}
	}
	return false
}
