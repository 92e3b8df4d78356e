package inject

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// secretEnv is the variable that tells the sidecar's plugin server which of
// its env holds Secret values (keys.EnvSecretEnv), so that it can keep them
// out of its logs and of the errors Argo CD shows; nil when none does. The
// injector never sees the values, only the catalog's references, so the rule
// is made of names: a secretKeyRef names its variable; an envFrom Secret's
// keys are known only to the kubelet, so it is a pattern, its prefix and "*".
// A variable the sidecar's env sets without a secretKeyRef wins over every
// envFrom (Kubernetes' order), so one a pattern covers is excluded with "!":
// HOME under "*" is a path that error messages quote, not a secret.
func secretEnv(env []corev1.EnvVar, envFrom []corev1.EnvFromSource) *corev1.EnvVar {
	var names, patterns []string
	seen := map[string]bool{}
	add := func(list *[]string, item string) {
		if !seen[item] {
			seen[item] = true
			*list = append(*list, item)
		}
	}
	fromSecret := map[string]bool{}
	for _, v := range env {
		if v.ValueFrom != nil && v.ValueFrom.SecretKeyRef != nil {
			fromSecret[v.Name] = true
			add(&names, v.Name)
		}
	}
	var prefixes []string
	for _, ef := range envFrom {
		if ef.SecretRef != nil {
			add(&patterns, ef.Prefix+"*")
			prefixes = append(prefixes, ef.Prefix)
		}
	}
	if len(names)+len(patterns) == 0 {
		return nil
	}
	var excluded []string
	for _, v := range env {
		if fromSecret[v.Name] {
			continue
		}
		for _, p := range prefixes {
			if strings.HasPrefix(v.Name, p) {
				add(&excluded, "!"+v.Name)
				break
			}
		}
	}
	items := append(append(names, patterns...), excluded...)
	return &corev1.EnvVar{Name: keys.EnvSecretEnv, Value: strings.Join(items, ",")}
}

// withSecretEnv is env and, last, its secretEnv rule for e's sidecar.
func withSecretEnv(env []corev1.EnvVar, e *catalog.Entry) []corev1.EnvVar {
	if v := secretEnv(env, e.EnvFrom); v != nil {
		env = append(env, *v)
	}
	return env
}
