package helmplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cmp-injector/cmp-injector/pkg/params"
)

// Chart files the announcement reads.
const (
	valuesFile = "values.yaml"
	schemaFile = "values.schema.json"
)

// announceParameters prints the chart's parameter announcement as a JSON array on r.Stdout.
//
// helm-parameters lists every leaf of the values, as Argo CD's native Helm does, with
// the text --set needs to restore it (a null is "null"). --set types only integers,
// booleans and null, so the leaves whose type it would get wrong are announced a
// second time in the map that restores them exactly: helm-string-parameters
// (--set-string) for strings --set would retype, helm-number-parameters and
// helm-boolean-parameters (--set-json) for numbers and booleans, which also gives the
// UI a number or boolean input. generateManifests lets those maps win over helm-parameters for
// the same key, so the whole announcement sent back renders as the chart's defaults.
func announceParameters(_ context.Context, r helmRequest) error {
	opts, b, err := r.prepare()
	if err != nil {
		return err
	}
	vals, err := effectiveValues(b, opts, r)
	if err != nil {
		return err
	}
	schema, err := loadSchema(b.appDir)
	if err != nil {
		fmt.Fprintf(r.Stderr, "warning: %s ignored for parameter types: %v\n", schemaFile, err)
	}
	files, err := valuesFiles(b.appDir)
	if err != nil {
		return err
	}
	list := announcement(files, flatten(vals, nil, nil), schema)
	out, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(r.Stdout, "%s\n", out)
	return err
}

// effectiveValues is values.yaml overlaid with the selected values files, in order,
// as Argo CD's native Helm shows the parameters of the files an app selects.
func effectiveValues(b *boundary, o *helmOptions, r helmRequest) (map[string]any, error) {
	vals := map[string]any{}
	paths := []string{valuesFile}
	paths = append(paths, o.ValuesFiles...)
	for i, p := range paths {
		real, err := b.resolve("values file", p)
		if errors.Is(err, errMissing) && (i == 0 || o.IgnoreMissing) {
			continue // a chart need not have values.yaml
		}
		if err != nil {
			return nil, err
		}
		data, err := os.ReadFile(real)
		if err != nil {
			return nil, err
		}
		m, err := decodeValues(data)
		if err != nil {
			return nil, fmt.Errorf("values file %q: %w", p, err)
		}
		vals = mergeValues(vals, m)
	}
	return vals, nil
}

func loadSchema(appDir string) (*valuesSchema, error) {
	data, err := os.ReadFile(filepath.Join(appDir, schemaFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseSchema(data)
}

// valuesFiles lists values*.yaml and values*.yml in the chart directory, sorted.
func valuesFiles(appDir string) ([]string, error) {
	entries, err := os.ReadDir(appDir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(n, "values") {
			continue
		}
		if strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml") {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

func announcement(files []string, leaves []leaf, schema *valuesSchema) []params.Announcement {
	all := make(map[string]string, len(leaves))
	byType := map[leafType]map[string]string{}
	for _, l := range leaves {
		key := l.path.String()
		all[key] = setText(l)
		typ := l.typ
		if st, ok := schema.typeOf(l.path); ok {
			typ = schemaLeafType(st, l)
		}
		if typ == leafString || typ == leafNull {
			continue // --set alone restores it
		}
		if byType[typ] == nil {
			byType[typ] = map[string]string{}
		}
		byType[typ][key] = l.value
	}
	list := []params.Announcement{
		{
			Name:           paramValuesFiles,
			Title:          "Values Files",
			Tooltip:        "Values files of the chart to apply, in order, relative to the chart directory.",
			CollectionType: params.CollectionArray,
			Array:          files,
		},
		{
			Name:    paramValues,
			Title:   "Values",
			Tooltip: "YAML values applied after the values files.",
		},
		{
			Name:  paramHelmParameters,
			Title: "Parameters",
			Tooltip: "Every value of the chart, overridden with --set; keys use --set syntax (a.b[0].c, dots in names as \\.). " +
				"--set types integers, true/false and null: use the typed maps below to keep another type.",
			CollectionType: params.CollectionMap,
			Map:            all,
		},
	}
	typed := []struct {
		name, title, tooltip, itemType string
		typ                            leafType
	}{
		{paramHelmStringParameters, "String Parameters", "Values kept strings with --set-string; wins over Parameters.", "", leafTypedString},
		{paramHelmNumberParameters, "Number Parameters", "Numeric values, set with --set-json; empty is null; wins over Parameters.", "number", leafNumber},
		{paramHelmBoolParameters, "Boolean Parameters", "Boolean values, set with --set-json; empty is null; wins over Parameters.", "boolean", leafBool},
	}
	for _, t := range typed {
		if len(byType[t.typ]) == 0 {
			continue
		}
		list = append(list, params.Announcement{
			Name: t.name, Title: t.title, Tooltip: t.tooltip, ItemType: t.itemType,
			CollectionType: params.CollectionMap, Map: byType[t.typ],
		})
	}
	return list
}

// setText is a leaf's value as helm-parameters announces it: the text that --set,
// after generate's escaping, turns back into that value ("null" for a null).
func setText(l leaf) string {
	if l.typ == leafNull {
		return "null"
	}
	return l.value
}

// schemaLeafType applies a schema's declared type where the value can carry it; a
// value the schema contradicts keeps its own type, since generate would refuse it.
func schemaLeafType(declared leafType, l leaf) leafType {
	if l.typ == leafNull && (declared == leafNumber || declared == leafBool) {
		return declared
	}
	switch declared {
	case leafNumber:
		if isNumber(l.value) {
			return leafNumber
		}
	case leafBool:
		if isBool(l.value) {
			return leafBool
		}
	case leafString:
		if l.typ == leafNull {
			return leafNull
		}
		if retypedBySet(l.value) {
			return leafTypedString
		}
		return leafString
	}
	return l.typ
}
