package params

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// EnvPrefix starts every variable derived from a parameter.
const EnvPrefix = "PARAM_"

// Escape upper-cases s and replaces every rune outside [A-Z0-9_] with one '_', the
// escaping the parameterized-CMP proposal defines for PARAM_ variable names.
func Escape(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range strings.ToUpper(s) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// Environ returns the PARAM_ variables for ps as NAME=value pairs: PARAM_<ESC(name)>
// for a string, PARAM_<ESC(name)>_<i> for each array item, PARAM_<ESC(name)>_<ESC(key)>
// for each map entry; every field that is present is emitted.
//
// Unlike Argo CD, the result is deterministic: when two variables collide the one
// produced later wins, parameters are taken in list order and map keys in ascending
// order, so within one map the greater key wins. Each name appears once, at the
// position where it was first produced.
func Environ(ps []AppParameter) []string {
	var env orderedEnv
	for _, p := range ps {
		base := EnvPrefix + Escape(p.Name)
		if p.String != nil {
			env.set(base, *p.String)
		}
		for _, k := range slices.Sorted(maps.Keys(p.Map)) {
			env.set(base+"_"+Escape(k), p.Map[k])
		}
		for i, item := range p.Array {
			env.set(base+"_"+strconv.Itoa(i), item)
		}
	}
	return env.pairs()
}

// orderedEnv is a last-value-wins set of variables that remembers first positions.
type orderedEnv struct {
	names  []string
	values map[string]string
}

func (e *orderedEnv) set(name, value string) {
	if e.values == nil {
		e.values = map[string]string{}
	}
	if _, ok := e.values[name]; !ok {
		e.names = append(e.names, name)
	}
	e.values[name] = value
}

func (e *orderedEnv) pairs() []string {
	out := make([]string, len(e.names))
	for i, n := range e.names {
		out[i] = n + "=" + e.values[n]
	}
	return out
}

// MergeEnv combines NAME=value lists; a later list (and a later entry) wins for the
// same name. Entries without '=' or with an empty name are dropped.
func MergeEnv(lists ...[]string) []string {
	var env orderedEnv
	for _, l := range lists {
		for _, kv := range l {
			name, value, ok := strings.Cut(kv, "=")
			if !ok || name == "" {
				continue
			}
			env.set(name, value)
		}
	}
	return env.pairs()
}

// Encode renders ps the way Argo CD fills ARGOCD_APP_PARAMETERS: a JSON array with
// keys in alphabetical order, absent fields omitted, and "null" for a nil list.
func Encode(ps []AppParameter) (string, error) {
	if ps == nil {
		return "null", nil
	}
	data, err := json.Marshal(ps)
	if err != nil {
		return "", err
	}
	return string(data), nil
}

// Decode parses an ARGOCD_APP_PARAMETERS value (or a --parameters file already
// converted to JSON). "null" and "" mean no parameters. Every entry needs a name: per
// the proposal the server refuses to generate with invalid parameters.
func Decode(data []byte) ([]AppParameter, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || bytes.Equal(data, []byte("null")) {
		return nil, nil
	}
	var ps []AppParameter
	if err := json.Unmarshal(data, &ps); err != nil {
		return nil, decodeError(err)
	}
	for i, p := range ps {
		if p.Name == "" {
			return nil, fmt.Errorf("parameter %d: name is required", i)
		}
	}
	return ps, nil
}

// parametersShape says what the parameters must look like, in YAML and in
// JSON, for errors a user reads: Go's own decoding errors name Go types.
const parametersShape = `parameters must be a list of entries with a name and one of string, array or map, ` +
	`e.g. in YAML "- name: replicas\n  string: '2'" or in JSON [{"name":"replicas","string":"2"}]`

// decodeError turns a decoding error into parametersShape and what was found
// where, without Go type names.
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		where := "at the top level"
		if te.Field != "" {
			where = "in " + te.Field
		}
		return fmt.Errorf("%s; found %s %s", parametersShape, jsonKind(te.Value), where)
	case errors.As(err, &se):
		return fmt.Errorf("%s; not valid JSON: %s (at byte %d)", parametersShape, se.Error(), se.Offset)
	}
	return fmt.Errorf("%s: %w", parametersShape, err)
}

func jsonKind(v string) string {
	switch v {
	case "object":
		return "a mapping (JSON object)"
	case "array":
		return "a list (JSON array)"
	case "string":
		return "a string"
	case "number":
		return "a number"
	case "bool":
		return "a boolean"
	}
	return v
}
