package pluginconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Load reads, parses and validates <dir>/plugin.yaml. Warnings (unknown keys and
// the like) are returned alongside a valid plugin; any validation problem is an error.
func Load(path string) (*Plugin, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading plugin configuration: %w", err)
	}
	p, warnings, err := Decode(data)
	if err != nil {
		return nil, warnings, fmt.Errorf("%s: %w", path, err)
	}
	return p, warnings, nil
}

// Decode parses and validates a plugin.yaml document: Load without the file.
func Decode(data []byte) (*Plugin, []string, error) {
	p, warnings, err := Parse(data)
	if err != nil {
		return nil, warnings, err
	}
	if err := p.Validate(); err != nil {
		return nil, warnings, err
	}
	return p, warnings, nil
}

// Parse decodes a plugin.yaml document. It fails only when the document is not a
// YAML mapping of the right shape (wrong value types included); it does not
// validate, so callers decide when to call Validate. Keys the schema does not know
// are not errors, because Argo CD ignores them too, but each one is reported in the
// warnings by its path so that a typo such as "paramters" does not go unnoticed.
//
// Key matching is case-insensitive, as in Argo CD (encoding/json semantics); a key
// spelled with another case is accepted and reported.
func Parse(data []byte) (*Plugin, []string, error) {
	// A parameter named N or a command argument on is the text, not a
	// YAML 1.1 boolean (yamlwords.go).
	jsonData, err := yaml.YAMLToJSON(QuoteYAML11Words(data, reflect.TypeOf(Plugin{}), nil))
	if err != nil {
		return nil, nil, fmt.Errorf("invalid YAML: %w", err)
	}
	trimmed := bytes.TrimSpace(jsonData)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil, nil, errors.New("empty plugin configuration")
	}
	if trimmed[0] != '{' {
		return nil, nil, errors.New("plugin configuration must be a YAML mapping")
	}
	var p Plugin
	if err := json.Unmarshal(jsonData, &p); err != nil {
		return nil, nil, fmt.Errorf("invalid plugin configuration: %w", err)
	}
	var generic any
	if err := json.Unmarshal(jsonData, &generic); err != nil {
		return nil, nil, fmt.Errorf("invalid plugin configuration: %w", err)
	}
	var warnings []string
	collectUnknownKeys(generic, reflect.TypeOf(p), "", &warnings)
	warnings = append(warnings, p.discoveryWarnings()...)
	return &p, warnings, nil
}

// legacyKeys are keys of Argo CD's removed argocd-cm plugins that users still copy
// into sidecar configs; Argo CD ignores them silently, we name them.
var legacyKeys = map[string]string{
	"spec.lockRepo": "lockRepo is ignored by sidecar plugins (use allowConcurrency: false to serialise generation)",
}

// collectUnknownKeys walks a decoded JSON value alongside the Go type it was
// decoded into and reports every key that type does not declare.
func collectUnknownKeys(v any, t reflect.Type, path string, out *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch val := v.(type) {
	case map[string]any:
		switch t.Kind() {
		case reflect.Struct:
			fields := jsonFields(t)
			for _, k := range slices.Sorted(maps.Keys(val)) {
				child := joinPath(path, k)
				f, ok := fields[k]
				if !ok {
					for name, cand := range fields {
						if strings.EqualFold(name, k) {
							*out = append(*out, fmt.Sprintf("key %q is spelled %q; accepted, but please use %q", child, k, name))
							f, ok = cand, true
							break
						}
					}
				}
				if !ok {
					if msg, legacy := legacyKeys[child]; legacy {
						*out = append(*out, msg)
					} else {
						*out = append(*out, fmt.Sprintf("unknown key %q is ignored", child))
					}
					continue
				}
				collectUnknownKeys(val[k], f.Type, child, out)
			}
		case reflect.Map:
			for k, item := range val {
				collectUnknownKeys(item, t.Elem(), joinPath(path, k), out)
			}
		}
	case []any:
		if t.Kind() == reflect.Slice {
			for i, item := range val {
				collectUnknownKeys(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), out)
			}
		}
	}
}

// jsonFields maps the JSON names of a struct's fields, following embedded structs
// the way encoding/json does.
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f
	}
	return out
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// discoveryWarnings reports discovery rules that are configured but can never be
// evaluated, because only the first configured rule counts.
func (p *Plugin) discoveryWarnings() []string {
	d := p.Spec.Discover
	if d == nil {
		return nil
	}
	var rules []string
	if d.FileName != "" {
		rules = append(rules, "spec.discover.fileName")
	}
	if d.Find != nil && d.Find.Glob != "" {
		rules = append(rules, "spec.discover.find.glob")
	}
	if d.Find != nil && len(d.Find.Command.Command) > 0 {
		rules = append(rules, "spec.discover.find.command")
	}
	if len(rules) < 2 {
		return nil
	}
	return []string{fmt.Sprintf("only the first discovery rule (%s) is evaluated; %s ignored", rules[0], strings.Join(rules[1:], ", "))}
}

// ConfigPath is the plugin.yaml path inside a config directory.
func ConfigPath(dir string) string {
	return filepath.Join(dir, "plugin.yaml")
}
