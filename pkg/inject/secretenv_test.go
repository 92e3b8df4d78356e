package inject

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

func TestSecretEnvRule(t *testing.T) {
	secretKey := func(name string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}}
	}
	configKey := corev1.EnvVar{Name: "AVP_TYPE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "c"}, Key: "k"}}}
	secretFrom := func(prefix string) corev1.EnvFromSource {
		return corev1.EnvFromSource{Prefix: prefix, SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}}
	}
	configFrom := corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}}
	literal := func(name string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: "/some/path"} }
	for _, tc := range []struct {
		name    string
		env     []corev1.EnvVar
		envFrom []corev1.EnvFromSource
		want    string // "" = no variable
	}{
		{"nothing secret", []corev1.EnvVar{literal("HOME"), configKey}, []corev1.EnvFromSource{configFrom}, ""},
		{"secretKeyRef", []corev1.EnvVar{literal("HOME"), secretKey("VAULT_TOKEN")}, nil, "VAULT_TOKEN"},
		{"twice the same name", []corev1.EnvVar{secretKey("T"), secretKey("T")}, nil, "T"},
		{"envFrom with a prefix", []corev1.EnvVar{literal("HOME"), configKey}, []corev1.EnvFromSource{secretFrom("AVP_")}, "AVP_*,!AVP_TYPE"},
		{"envFrom without prefix", []corev1.EnvVar{literal("HOME"), secretKey("VAULT_TOKEN")}, []corev1.EnvFromSource{configFrom, secretFrom("")},
			"VAULT_TOKEN,*,!HOME"},
		{"two envFrom Secrets", nil, []corev1.EnvFromSource{secretFrom("A_"), secretFrom("B_"), secretFrom("A_")}, "A_*,B_*"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := secretEnv(tc.env, tc.envFrom)
			switch {
			case tc.want == "" && got != nil:
				t.Errorf("got %s=%s, want no variable", got.Name, got.Value)
			case tc.want != "" && (got == nil || got.Name != keys.EnvSecretEnv || got.Value != tc.want || got.ValueFrom != nil):
				t.Errorf("got %+v, want %s=%s", got, keys.EnvSecretEnv, tc.want)
			}
		})
	}
}
