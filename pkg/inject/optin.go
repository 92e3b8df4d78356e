package inject

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// stringMetadata says plainly what is wrong when the pod (template) at path
// in obj has a label or annotation value that is not a string: in YAML an
// unquoted true is a boolean (argo-helm's podLabels: {cmp-injector.io/inject:
// true}), which the API server refuses and which would otherwise surface as a
// Go unmarshal error.
func stringMetadata(obj map[string]any, path []string) error {
	pod, ok := nested(obj, path)
	if !ok {
		return nil // PodJSON names the missing template
	}
	meta, _ := pod["metadata"].(map[string]any)
	at := strings.Join(append(append([]string{}, path...), "metadata"), ".")
	var problems []string
	for _, field := range []string{"labels", "annotations"} {
		m, _ := meta[field].(map[string]any)
		ks := make([]string, 0, len(m))
		for k := range m {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			v := m[k]
			if _, ok := v.(string); ok {
				continue
			}
			problems = append(problems, fmt.Sprintf(
				"%s %q in %s.%s is %s, not a string: quote it (%s: %q); the API server refuses %s that are not strings",
				strings.TrimSuffix(field, "s"), k, at, field, describeValue(v), k, fmt.Sprint(v), field))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

// describeValue names a decoded YAML value's type for a message.
func describeValue(v any) string {
	switch v := v.(type) {
	case bool:
		return fmt.Sprintf("the boolean %t", v)
	case float64, int, int64:
		return fmt.Sprintf("the number %v", v)
	case nil:
		return "empty (null)"
	default:
		return fmt.Sprintf("a %T", v)
	}
}

// optInHints names opt-ins put where the webhook does not read them: the
// webhook sees pods, so a workload whose own metadata carries the inject
// label or the plugins annotation while its pod template does not (argo-helm's
// repoServer.deploymentLabels instead of repoServer.podLabels) is skipped as
// not labelled, silently.
func optInHints(meta map[string]any, pod *corev1.Pod, path []string) []string {
	if len(path) == 0 {
		return nil
	}
	var hints []string
	labels, _ := meta["labels"].(map[string]any)
	if _, ok := labels[keys.InjectLabel]; ok && pod.Labels[keys.InjectLabel] == "" {
		hints = append(hints, fmt.Sprintf(
			"the workload's own metadata.labels carry %s, but the webhook reads the pod's labels: put it in %s.metadata.labels (argo-helm: repoServer.podLabels, not repoServer.deploymentLabels)",
			keys.InjectLabel, strings.Join(path, ".")))
	}
	annotations, _ := meta["annotations"].(map[string]any)
	if _, ok := annotations[keys.PluginsAnnotation]; ok && pod.Annotations[keys.PluginsAnnotation] == "" {
		hints = append(hints, fmt.Sprintf(
			"the workload's own metadata.annotations carry %s, but the webhook reads the pod's annotations: put it in %s.metadata.annotations (argo-helm: repoServer.podAnnotations, not repoServer.deploymentAnnotations)",
			keys.PluginsAnnotation, strings.Join(path, ".")))
	}
	return hints
}
