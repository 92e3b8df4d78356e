package cdk8splugin

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/cmp-injector/cmp-injector/pkg/params"
)

// The parameters the plugin reads; plugin.yaml announces the same names.
const (
	paramEnv = "env"
	paramApp = "app"
)

// synth is a cdk8s synth run: the argv (without the program), the
// environment it adds, and warnings for what it ignores.
type synth struct {
	argv, env, warnings []string
	hasApp              bool
}

// envName is a POSIX environment variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reservedNames and reservedPrefixes are names an env parameter may not set: what finds the
// tools and the image's libraries (PATH, NODE_PATH, LD_*), what changes how
// Node.js, ts-node or cdk8s-cli run rather than what the app renders, and
// what Argo CD and the plugin server set for the request.
var reservedNames = []string{"PATH", "HOME", "SHELL", "TMPDIR"}

var reservedPrefixes = []string{"NODE_", "LD_", "TS_NODE_", "CDK8S_", "ARGOCD_", "CMP_", "KUBE_", "GIT_"}

// synthArgs is the cdk8s command line and environment for an Application's
// parameters. --check-upgrade=false keeps cdk8s-cli from asking npm for a
// newer release on every render (the sidecar has no reason to reach it).
// The app command runs through a shell, as cdk8s synth runs cdk8s.yaml's:
// the Application's author, who sets it, writes the app's code anyway.
func synthArgs(ps []params.AppParameter) (synth, error) {
	s := synth{argv: []string{"synth", "--stdout", "--check-upgrade=false"}}
	for _, p := range ps {
		switch p.Name {
		case paramEnv:
			if p.Map == nil && (p.String != nil || p.Array != nil) {
				return s, fmt.Errorf("parameter %s: want a map of environment variables", paramEnv)
			}
			names := make([]string, 0, len(p.Map))
			for n := range p.Map {
				names = append(names, n)
			}
			slices.Sort(names)
			for _, n := range names {
				if err := checkEnvName(n); err != nil {
					return s, err
				}
				s.env = append(s.env, n+"="+p.Map[n])
			}
		case paramApp:
			if p.String == nil || strings.TrimSpace(*p.String) == "" {
				return s, fmt.Errorf("parameter %s: want the app's command, e.g. node main.js", paramApp)
			}
			s.argv = append(s.argv, "--app", *p.String)
			s.hasApp = true
		default:
			s.warnings = append(s.warnings, fmt.Sprintf("unknown parameter %q ignored (known: %s, %s)", p.Name, paramEnv, paramApp))
		}
	}
	return s, nil
}

func checkEnvName(n string) error {
	if !envName.MatchString(n) {
		return fmt.Errorf("parameter %s: %q is not an environment variable name", paramEnv, n)
	}
	if slices.Contains(reservedNames, strings.ToUpper(n)) {
		return fmt.Errorf("parameter %s: %s is reserved (the image and the plugin server set it)", paramEnv, n)
	}
	for _, r := range reservedPrefixes {
		if strings.HasPrefix(strings.ToUpper(n), r) {
			return fmt.Errorf("parameter %s: %s is reserved (names starting with %s are set by the image, Argo CD or the plugin server)", paramEnv, n, r)
		}
	}
	return nil
}
