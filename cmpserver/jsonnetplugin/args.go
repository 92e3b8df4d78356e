package jsonnetplugin

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
	paramMain    = "main"
	paramExtVars = "ext-vars"
	paramExtCode = "ext-code"
	paramTLAs    = "tlas"
	paramTLACode = "tla-code"
	paramLibs    = "libs"
)

// defaultMain is the file evaluated when the Application names none.
const defaultMain = "main.jsonnet"

// mapFlags are the map parameters and the jsonnet flag each entry becomes, in
// the order they are passed.
var mapFlags = []struct{ param, flag string }{
	{paramExtVars, "--ext-str"},
	{paramExtCode, "--ext-code"},
	{paramTLAs, "--tla-str"},
	{paramTLACode, "--tla-code"},
}

// jsonnetArgs is the jsonnet command line (without the program) for an Application's
// parameters, and warnings for what it ignores. Every value is the argument
// after its flag, which jsonnet never reads as a flag, and the file follows
// "--", so no parameter can add an option. Map entries go in key order, so one
// parameter list always gives one command line.
func jsonnetArgs(ps []params.AppParameter) (argv, warnings []string, err error) {
	main := defaultMain
	var libs []string
	for _, p := range ps {
		switch p.Name {
		case paramMain:
			if p.String == nil {
				return nil, warnings, fmt.Errorf("parameter %s: want a string (a file of the app directory)", paramMain)
			}
			main = *p.String
		case paramExtVars, paramExtCode, paramTLAs, paramTLACode:
			// VarArgs, below, reads and checks them.
		case paramLibs:
			if p.Array == nil && (p.String != nil || p.Map != nil) {
				return nil, warnings, fmt.Errorf("parameter %s: want an array of directories", paramLibs)
			}
			libs = p.Array
		default:
			warnings = append(warnings, fmt.Sprintf("unknown parameter %q ignored (known: %s)", p.Name,
				strings.Join([]string{paramMain, paramExtVars, paramExtCode, paramTLAs, paramTLACode, paramLibs}, ", ")))
		}
	}
	vars, err := VarArgs(ps)
	if err != nil {
		return nil, warnings, err
	}
	if err := toolrun.CheckRelative(paramMain, main); err != nil {
		return nil, warnings, err
	}
	argv = append(argv, vars...)
	for _, dir := range libs {
		if err := toolrun.CheckRelative(paramLibs, dir); err != nil {
			return nil, warnings, err
		}
		argv = append(argv, "--jpath", dir)
	}
	return append(argv, "--", main), warnings, nil
}

// IsVarParam says whether name is one of the variable parameters VarArgs
// reads (ext-vars, ext-code, tlas, tla-code).
func IsVarParam(name string) bool {
	for _, m := range mapFlags {
		if m.param == name {
			return true
		}
	}
	return false
}

// VarArgs is the --ext-str, --ext-code, --tla-str and --tla-code part of a
// command line for the variable parameters among ps (the others are left
// alone): flags jsonnet and Tanka's tk both take. Flags go in mapFlags' order
// and each map in key order, so one parameter list always gives one command
// line.
func VarArgs(ps []params.AppParameter) ([]string, error) {
	maps := map[string]map[string]string{}
	for _, p := range ps {
		if !IsVarParam(p.Name) {
			continue
		}
		if p.Map == nil && (p.String != nil || p.Array != nil) {
			return nil, fmt.Errorf("parameter %s: want a map of name to value", p.Name)
		}
		maps[p.Name] = p.Map
	}
	var argv []string
	for _, m := range mapFlags {
		for _, k := range sortedKeys(maps[m.param]) {
			// jsonnet splits NAME=VALUE at the first '=': a name holding
			// one would give the variable another name and value.
			if k == "" || strings.Contains(k, "=") {
				return nil, fmt.Errorf("parameter %s: name %q must be non-empty and hold no '='", m.param, k)
			}
			argv = append(argv, m.flag, k+"="+maps[m.param][k])
		}
	}
	return argv, nil
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }
