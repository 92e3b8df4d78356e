package tankaplugin

import (
	"fmt"
	"strings"

	"github.com/cmp-injector/cmp-injector/cmpserver/jsonnetplugin"
	"github.com/cmp-injector/cmp-injector/pkg/params"
)

// The parameters the plugin reads besides Jsonnet's variables
// (jsonnetplugin.VarArgs); plugin.yaml announces the same names.
const (
	paramName    = "name"
	paramTargets = "targets"
)

// tkArgs is the tk command line (without the program) for an Application's
// parameters, and warnings for what it ignores. tk show refuses to print to
// a pipe without --dangerous-allow-redirect and then exits 0 with nothing
// printed (tk v0.31's cmd/tk/workflow.go), so the flag is always given: an
// app would otherwise render to no manifests without an error. Each value is
// the argument after its flag, which tk never reads as a flag.
func tkArgs(ps []params.AppParameter) (argv, warnings []string, err error) {
	argv = []string{"show", ".", "--dangerous-allow-redirect"}
	vars, err := jsonnetplugin.VarArgs(ps)
	if err != nil {
		return nil, nil, err
	}
	argv = append(argv, vars...)
	for _, p := range ps {
		switch {
		case jsonnetplugin.IsVarParam(p.Name):
		case p.Name == paramName:
			if p.String == nil || *p.String == "" {
				return nil, warnings, fmt.Errorf("parameter %s: want a string (part of one inline environment's name)", paramName)
			}
			argv = append(argv, "--name", *p.String)
		case p.Name == paramTargets:
			if p.Array == nil && (p.String != nil || p.Map != nil) {
				return nil, warnings, fmt.Errorf("parameter %s: want an array of <kind>/<name> patterns", paramTargets)
			}
			for _, t := range p.Array {
				argv = append(argv, "--target", t)
			}
		default:
			warnings = append(warnings, fmt.Sprintf("unknown parameter %q ignored (known: ext-vars, ext-code, tlas, tla-code, %s)", p.Name,
				strings.Join([]string{paramName, paramTargets}, ", ")))
		}
	}
	return argv, warnings, nil
}
