package kustomizeplugin

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/cmp-injector/cmp-injector/pkg/params"
)

// The parameters the plugin reads; the plugin.yaml files announce them.
const (
	paramVersion    = "version"
	paramNamePrefix = "name-prefix"
	paramNameSuffix = "name-suffix"
	paramImages     = "images"
)

var knownParams = strings.Join([]string{paramVersion, paramNamePrefix, paramNameSuffix, paramImages}, ", ")

// versionPattern is what a version may hold: it becomes part of a program's
// name (kustomize-<version>), so no path separator and nothing a PATH lookup
// would read otherwise.
var versionPattern = regexp.MustCompile(`^[0-9A-Za-z.+-]+$`)

// plan is what one generate runs: each edit and then the build, as
// kustomize's arguments, with the kustomize the version asks for.
type plan struct {
	version string   // the kustomize version asked for; "" for the one on PATH
	edits   []edit   // kustomize edit set ..., in order
	build   []string // kustomize build ...
}

// edit is one `kustomize edit` and the parameter it comes from, which its
// error names.
type edit struct {
	param string
	args  []string
}

// newPlan turns an Application's parameters into the kustomize command lines,
// as the earlier shell plugins ran them: prefix, then suffix, then each image
// in order, then the build. Every value is the one argument after "--", so a
// value such as --load-restrictor=none stays a value, and reaches kustomize
// exactly as the user typed it. Unknown parameters are warnings.
func newPlan(ps []params.AppParameter, enableHelm bool) (plan, []string, error) {
	var p plan
	var warnings []string
	var prefix, suffix string
	var images []string
	for _, ap := range ps {
		var err error
		switch ap.Name {
		case paramVersion:
			p.version, err = stringParam(ap)
			if err == nil && p.version != "" && !versionPattern.MatchString(p.version) {
				err = fmt.Errorf("parameter %s: only letters, digits and . + - are allowed, got %q", paramVersion, p.version)
			}
		case paramNamePrefix:
			prefix, err = stringParam(ap)
		case paramNameSuffix:
			suffix, err = stringParam(ap)
		case paramImages:
			images, err = imagesParam(ap)
		default:
			warnings = append(warnings, fmt.Sprintf("unknown parameter %q ignored (known: %s)", ap.Name, knownParams))
		}
		if err != nil {
			return plan{}, warnings, err
		}
	}
	if prefix != "" {
		p.edits = append(p.edits, edit{paramNamePrefix, []string{"edit", "set", "nameprefix", "--", prefix}})
	}
	if suffix != "" {
		p.edits = append(p.edits, edit{paramNameSuffix, []string{"edit", "set", "namesuffix", "--", suffix}})
	}
	for _, img := range images {
		p.edits = append(p.edits, edit{paramImages, []string{"edit", "set", "image", "--", img}})
	}
	p.build = []string{"build", "."}
	if enableHelm {
		// kustomize finds helm on the plugin env's PATH, as this server does.
		p.build = []string{"build", "--enable-helm", "--helm-command", "helm", "."}
	}
	return p, warnings, nil
}

// stringParam is a string parameter's value; a parameter sent with no value
// is empty, as an unset one.
func stringParam(ap params.AppParameter) (string, error) {
	if ap.String == nil {
		if ap.Array != nil || ap.Map != nil {
			return "", fmt.Errorf("parameter %s: want a string", ap.Name)
		}
		return "", nil
	}
	return *ap.String, checkArg(ap.Name, *ap.String)
}

// imagesParam is the images array: kustomize image specs such as
// nginx=registry.example.com/nginx:1.27 or nginx:1.27, applied in order.
func imagesParam(ap params.AppParameter) ([]string, error) {
	if ap.Array == nil && (ap.String != nil || ap.Map != nil) {
		return nil, fmt.Errorf("parameter %s: want an array of kustomize image specs, e.g. nginx=registry.example.com/nginx:1.27", paramImages)
	}
	for i, img := range ap.Array {
		if strings.TrimSpace(img) == "" {
			return nil, fmt.Errorf("parameter %s: entry %d is empty; want a kustomize image spec, e.g. nginx:1.27", paramImages, i)
		}
		if err := checkArg(fmt.Sprintf("%s entry %d", paramImages, i), img); err != nil {
			return nil, err
		}
	}
	return ap.Array, nil
}

// checkArg refuses what no command line can carry: a NUL byte would fail
// exec with a message that names no parameter.
func checkArg(name, v string) error {
	if strings.ContainsRune(v, 0) {
		return fmt.Errorf("parameter %s: holds a NUL byte, which no command argument can carry", name)
	}
	return nil
}
