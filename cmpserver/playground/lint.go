package playground

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/cmp-injector/cmp-injector/pkg/params"
)

// Item types the playground gives typed inputs. Argo CD's UI shows every item
// type as text; the proposal names these two besides string.
const (
	itemString  = "string"
	itemNumber  = "number"
	itemBoolean = "boolean"
)

// Problem is something about the announcement an author should know: the
// announcement itself loaded, but the UI will not show what the author meant.
type Problem struct {
	// Parameter is the announced name ("" for the announcement as a whole).
	Parameter string `json:"parameter"`
	// Index is the entry's position in the merged announcement.
	Index    int    `json:"index"`
	Severity string `json:"severity"` // warning or info
	Message  string `json:"message"`
}

// jsonNumber is the JSON number grammar, which is what a number item holds
// (the Helm plugin passes it to --set-json).
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// fitsItemType reports whether value is a valid item of itemType, and if not,
// why. An empty value fits every type: it means "unset".
func fitsItemType(itemType, value string) (bool, string) {
	if value == "" {
		return true, ""
	}
	switch itemType {
	case itemNumber:
		if !jsonNumber.MatchString(strings.TrimSpace(value)) {
			return false, fmt.Sprintf("%q is not a number", value)
		}
	case itemBoolean:
		if value != "true" && value != "false" {
			return false, fmt.Sprintf("%q is not true or false", value)
		}
	}
	return true, ""
}

// lint checks a merged announcement (dynamic entries first, static from index
// firstStatic on) for what Argo CD accepts silently but shows differently from
// what the author likely meant.
func lint(as []params.Announcement, firstStatic int) []Problem {
	problems := []Problem{}
	add := func(i int, severity, format string, a ...any) {
		name := ""
		if i >= 0 {
			name = as[i].Name
		}
		problems = append(problems, Problem{Parameter: name, Index: i, Severity: severity, Message: fmt.Sprintf(format, a...)})
	}
	source := func(i int) string {
		if i >= firstStatic {
			return "static"
		}
		return "dynamic"
	}
	first := map[string]int{}
	byVar := map[string][]int{}
	for i, a := range as {
		if j, ok := first[a.Name]; ok {
			add(i, "warning", "announced again (first as entry %d, %s): Argo CD's UI shows only the first entry of a name, so this %s entry is ignored", j, source(j), source(i))
			continue
		}
		first[a.Name] = i
		v := params.EnvPrefix + params.Escape(a.Name)
		byVar[v] = append(byVar[v], i)
		switch a.ItemType {
		case "", itemString, itemNumber, itemBoolean:
		default:
			add(i, "info", "itemType %q is free text to Argo CD; the playground types only number and boolean", a.ItemType)
		}
		for _, bad := range misfits(a) {
			add(i, "warning", "default %s", bad)
		}
		if a.Required && a.String == "" && len(a.Array) == 0 && len(a.Map) == 0 {
			add(i, "info", "required, with no default: Argo CD does not enforce required, the plugin must check it")
		}
	}
	vars := make([]string, 0, len(byVar))
	for v := range byVar {
		vars = append(vars, v)
	}
	sort.Strings(vars)
	for _, v := range vars {
		if idx := byVar[v]; len(idx) > 1 {
			names := make([]string, len(idx))
			for k, i := range idx {
				names[k] = fmt.Sprintf("%q", as[i].Name)
			}
			add(idx[len(idx)-1], "warning", "names %s all become %s: the later parameter overwrites the earlier one's variables", strings.Join(names, ", "), v)
		}
	}
	return problems
}

// misfits lists the default values of a that do not fit its itemType.
func misfits(a params.Announcement) []string {
	var out []string
	check := func(where, v string) {
		if ok, why := fitsItemType(a.ItemType, v); !ok {
			out = append(out, where+why)
		}
	}
	switch a.CollectionType {
	case params.CollectionArray:
		for i, v := range a.Array {
			check(fmt.Sprintf("item %d: ", i), v)
		}
	case params.CollectionMap:
		keys := make([]string, 0, len(a.Map))
		for k := range a.Map {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			check(fmt.Sprintf("%q: ", k), a.Map[k])
		}
	default:
		check("", a.String)
	}
	return out
}
