package helmplugin

import (
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/params"
)

// Parameter names the plugin understands. They follow Argo CD's native Helm source
// fields (valueFiles, values, parameters, fileParameters, releaseName, ...).
const (
	paramValuesFiles          = "values-files"
	paramValues               = "values"
	paramHelmParameters       = "helm-parameters"
	paramHelmStringParameters = "helm-string-parameters"
	paramHelmNumberParameters = "helm-number-parameters"
	paramHelmBoolParameters   = "helm-boolean-parameters"
	paramFileParameters       = "file-parameters"
	paramReleaseName          = "release-name"
	paramNamespace            = "namespace"
	paramKubeVersion          = "kube-version"
	paramAPIVersions          = "api-versions"
	paramSkipCRDs             = "skip-crds"
	paramSkipTests            = "skip-tests"
	paramIncludeCRDs          = "include-crds"
	paramSkipSchemaValidation = "skip-schema-validation"
	paramIgnoreMissingValues  = "ignore-missing-value-files"
	paramPassCredentials      = "pass-credentials"
)

// Environment variables of the build env the plugin reads.
const (
	// envRepoRoot, when set, is the root of the extracted repository: values and
	// set-file paths must stay inside it. Without it the app dir is the boundary.
	envRepoRoot = "CMP_REPO_ROOT"
)

// helmOptions are the parsed plugin parameters, in the shape helm template needs.
type helmOptions struct {
	ValuesFiles   []string
	Values        string
	HasValues     bool
	Set           map[string]string
	SetString     map[string]string
	SetNumber     map[string]string
	SetBool       map[string]string
	SetFile       map[string]string
	ReleaseName   string
	Namespace     string
	KubeVersion   string
	APIVersions   []string
	SkipCRDs      bool
	SkipTests     bool
	IncludeCRDs   bool
	SkipSchema    bool
	IgnoreMissing bool
	PassCreds     bool
}

// paramKind is the field of an Application parameter a name is read from.
type paramKind int

const (
	kindString paramKind = iota
	kindArray
	kindMap
	kindBool
	kindList // a comma separated string, or an array
)

var paramKinds = map[string]paramKind{
	paramValuesFiles:          kindArray,
	paramValues:               kindString,
	paramHelmParameters:       kindMap,
	paramHelmStringParameters: kindMap,
	paramHelmNumberParameters: kindMap,
	paramHelmBoolParameters:   kindMap,
	paramFileParameters:       kindMap,
	paramReleaseName:          kindString,
	paramNamespace:            kindString,
	paramKubeVersion:          kindString,
	paramAPIVersions:          kindList,
	paramSkipCRDs:             kindBool,
	paramSkipTests:            kindBool,
	paramIncludeCRDs:          kindBool,
	paramSkipSchemaValidation: kindBool,
	paramIgnoreMissingValues:  kindBool,
	paramPassCredentials:      kindBool,
}

// parseOptions turns the plugin env into helmOptions. Unknown parameter names are reported
// on warn and ignored, as Argo CD passes any name a user sets.
func parseOptions(env map[string]string, warn io.Writer) (*helmOptions, error) {
	list, err := params.Decode([]byte(env[keys.EnvAppParameters]))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keys.EnvAppParameters, err)
	}
	o := &helmOptions{
		ReleaseName: releaseNameFromApp(env[keys.EnvAppName]),
		Namespace:   env[keys.EnvAppNamespace],
		KubeVersion: env[keys.EnvKubeVersion],
		APIVersions: splitList(env[keys.EnvKubeAPIVersions]),
		IncludeCRDs: true,
	}
	includeCRDsSet := false
	for _, p := range list {
		kind, known := paramKinds[p.Name]
		if !known {
			fmt.Fprintf(warn, "warning: ignoring unknown parameter %q\n", p.Name)
			continue
		}
		v, present, err := paramValue(p, kind)
		if err != nil {
			return nil, err
		}
		if !present {
			continue
		}
		switch p.Name {
		case paramValuesFiles:
			o.ValuesFiles = v.array
		case paramValues:
			o.Values, o.HasValues = v.str, true
		case paramHelmParameters:
			o.Set = v.m
		case paramHelmStringParameters:
			o.SetString = v.m
		case paramHelmNumberParameters:
			o.SetNumber = v.m
		case paramHelmBoolParameters:
			o.SetBool = v.m
		case paramFileParameters:
			o.SetFile = v.m
		case paramReleaseName:
			o.ReleaseName = v.str
		case paramNamespace:
			o.Namespace = v.str
		case paramKubeVersion:
			o.KubeVersion = v.str
		case paramAPIVersions:
			o.APIVersions = v.array
		case paramSkipCRDs:
			o.SkipCRDs = v.b
		case paramSkipTests:
			o.SkipTests = v.b
		case paramIncludeCRDs:
			o.IncludeCRDs, includeCRDsSet = v.b, true
		case paramSkipSchemaValidation:
			o.SkipSchema = v.b
		case paramIgnoreMissingValues:
			o.IgnoreMissing = v.b
		case paramPassCredentials:
			o.PassCreds = v.b
		}
	}
	if o.SkipCRDs {
		if includeCRDsSet && o.IncludeCRDs {
			return nil, fmt.Errorf("parameters %s and %s are both true; set only one", paramSkipCRDs, paramIncludeCRDs)
		}
		o.IncludeCRDs = false
	}
	if err := checkTyped(paramHelmNumberParameters, o.SetNumber, isNumber); err != nil {
		return nil, err
	}
	if err := checkTyped(paramHelmBoolParameters, o.SetBool, isBool); err != nil {
		return nil, err
	}
	return o, nil
}

// value is a parameter's payload after picking the field its kind reads.
type value struct {
	str   string
	array []string
	m     map[string]string
	b     bool
}

// paramValue picks the field a parameter's kind reads. A parameter with no field at
// all is treated as unset; one that carries only another field is an error, since the
// user plainly meant something the plugin would otherwise drop silently.
func paramValue(p params.AppParameter, kind paramKind) (value, bool, error) {
	wrong := func(want string) error {
		return fmt.Errorf("parameter %q must be given as %s (got %s)", p.Name, want, describeFields(p))
	}
	none := p.String == nil && p.Array == nil && p.Map == nil
	switch kind {
	case kindArray:
		if p.Array != nil {
			return value{array: p.Array}, true, nil
		}
		if none {
			return value{}, false, nil
		}
		return value{}, false, wrong("an array")
	case kindMap:
		if p.Map != nil {
			return value{m: p.Map}, true, nil
		}
		if none {
			return value{}, false, nil
		}
		return value{}, false, wrong("a map")
	case kindList:
		if p.Array != nil {
			return value{array: p.Array}, true, nil
		}
		if p.String != nil {
			return value{array: splitList(*p.String)}, true, nil
		}
		if none {
			return value{}, false, nil
		}
		return value{}, false, wrong("a comma separated string or an array")
	}
	if p.String == nil {
		if none {
			return value{}, false, nil
		}
		return value{}, false, wrong("a string")
	}
	if kind == kindBool {
		switch strings.ToLower(strings.TrimSpace(*p.String)) {
		case "true":
			return value{b: true}, true, nil
		case "false", "":
			return value{b: false}, true, nil
		}
		return value{}, false, fmt.Errorf("parameter %q must be \"true\" or \"false\", got %q", p.Name, *p.String)
	}
	return value{str: *p.String}, true, nil
}

func describeFields(p params.AppParameter) string {
	var f []string
	if p.String != nil {
		f = append(f, "string")
	}
	if p.Array != nil {
		f = append(f, "array")
	}
	if p.Map != nil {
		f = append(f, "map")
	}
	return strings.Join(f, " and ")
}

// splitList splits a comma separated list, dropping empty items and spaces around them.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// releaseNameFromApp strips the "<namespace>_" prefix Argo CD puts on the names of
// applications outside its own namespace; helm rejects "_" in release names and
// Argo CD's native Helm uses the bare application name too.
func releaseNameFromApp(app string) string {
	if _, name, ok := strings.Cut(app, "_"); ok {
		return name
	}
	return app
}

func checkTyped(param string, m map[string]string, ok func(string) bool) error {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !ok(m[k]) {
			return fmt.Errorf("parameter %q: value %q of key %q is not of the announced type", param, m[k], k)
		}
	}
	return nil
}

// jsonNumber is the JSON number grammar; --set-json must receive exactly that.
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// An empty value in the number and boolean maps stands for null, which is how a
// schema-typed null default is announced.
func isNumber(s string) bool { return s == "" || jsonNumber.MatchString(s) }

func isBool(s string) bool { return s == "" || s == "true" || s == "false" }
