package inject

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// parsePlugins reads the plugins annotation: catalog names separated by commas,
// with optional spaces around each. It returns the names in order and one
// problem per defect, so a user fixes everything in one round.
func parsePlugins(value string) ([]string, []Problem) {
	var problems []Problem
	bad := func(format string, args ...any) {
		problems = append(problems, Problem{
			Reason:  ReasonMalformedAnnotation,
			Message: fmt.Sprintf("annotation %s: ", keys.PluginsAnnotation) + fmt.Sprintf(format, args...),
		})
	}
	if strings.TrimSpace(value) == "" {
		bad("is empty; list catalog plugins separated by commas, e.g. \"helm, kustomize\"")
		return nil, problems
	}
	// A list no catalog could satisfy is one problem, not one per entry.
	if len(value) > maxPluginsAnnotationBytes {
		bad("is %d bytes long; at most %d bytes (%d plugins) are accepted", len(value), maxPluginsAnnotationBytes, maxPluginsListed)
		return nil, problems
	}
	if n := strings.Count(value, ",") + 1; n > maxPluginsListed {
		bad("lists %d entries; at most %d plugins are accepted", n, maxPluginsListed)
		return nil, problems
	}
	parts := strings.Split(value, ",")
	names := make([]string, 0, len(parts))
	seen := make(map[string]bool, len(parts))
	for i, raw := range parts {
		name := strings.TrimSpace(raw)
		switch {
		case name == "":
			bad("entry %d is empty", i+1)
		case strings.ContainsAny(name, " \t\n;|:"):
			bad("%s is not a plugin name; separate plugins with commas", quoteBounded(name))
		case len(validation.IsDNS1123Label(name)) > 0:
			bad("%s is not a valid plugin name (lower-case letters, digits and '-')", quoteBounded(name))
		case seen[name]:
			bad("plugin %q is listed more than once", name)
		default:
			seen[name] = true
			names = append(names, name)
		}
	}
	return names, problems
}
