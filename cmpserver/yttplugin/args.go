package yttplugin

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cmp-injector/cmp-injector/cmpserver/toolrun"
	"github.com/cmp-injector/cmp-injector/pkg/params"
)

// The parameters the plugin reads; plugin.yaml announces the same names.
const (
	paramDataValues     = "data-values"
	paramDataValuesYAML = "data-values-yaml"
	paramValuesFiles    = "data-values-files"
	paramFiles          = "files"
)

var known = []string{paramDataValues, paramDataValuesYAML, paramValuesFiles, paramFiles}

// yttArgs is the ytt command line (without the program) for an Application's
// parameters, and warnings for what it ignores. Each value is the argument
// after its flag, which ytt never reads as a flag, so no parameter can add an
// option; map entries go in key order, so one parameter list always gives one
// command line.
func yttArgs(ps []params.AppParameter) (argv, warnings []string, err error) {
	files := []string{"."}
	var valuesFiles []string
	dv := map[string]map[string]string{}
	for _, p := range ps {
		switch p.Name {
		case paramDataValues, paramDataValuesYAML:
			if p.Map == nil && (p.String != nil || p.Array != nil) {
				return nil, warnings, fmt.Errorf("parameter %s: want a map of data value to value", p.Name)
			}
			dv[p.Name] = p.Map
		case paramValuesFiles, paramFiles:
			if p.Array == nil && (p.String != nil || p.Map != nil) {
				return nil, warnings, fmt.Errorf("parameter %s: want an array of paths", p.Name)
			}
			if p.Name == paramFiles {
				if len(p.Array) > 0 {
					files = p.Array
				}
			} else {
				valuesFiles = p.Array
			}
		default:
			warnings = append(warnings, fmt.Sprintf("unknown parameter %q ignored (known: %s)", p.Name, strings.Join(known, ", ")))
		}
	}
	for _, f := range files {
		if err := toolrun.CheckRelative(paramFiles, f); err != nil {
			return nil, warnings, err
		}
		argv = append(argv, "-f", f)
	}
	for _, f := range valuesFiles {
		if err := toolrun.CheckRelative(paramValuesFiles, f); err != nil {
			return nil, warnings, err
		}
		argv = append(argv, "--data-values-file", f)
	}
	for _, m := range []struct{ param, flag string }{{paramDataValues, "--data-value"}, {paramDataValuesYAML, "--data-value-yaml"}} {
		for _, k := range slices.Sorted(maps.Keys(dv[m.param])) {
			// ytt splits KEY=VALUE at the first '=' (a dotted key names a
			// nested value): a key holding one would name another value.
			if k == "" || strings.Contains(k, "=") {
				return nil, warnings, fmt.Errorf("parameter %s: key %q must be non-empty and hold no '='", m.param, k)
			}
			argv = append(argv, m.flag, k+"="+dv[m.param][k])
		}
	}
	return argv, warnings, nil
}
