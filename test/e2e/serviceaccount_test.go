package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// What the real apiserver does with service-account tokens, which decides what
// reaches a plugin (checked here on kube-apiserver v1.37, v1.34 and v1.32, and read in
// plugin/pkg/admission/serviceaccount and apiserver's admission/reinvocation.go):
//
//   - The ServiceAccount admission plugin runs before the mutating webhooks. On a
//     pod that automounts its token it adds the projected volume kube-api-access-<random>
//     and mounts it at /var/run/secrets/kubernetes.io/serviceaccount in every init
//     container and container that mounts nothing at that path.
//   - When any webhook changes the object, the apiserver runs the whole mutating
//     chain once more, the built-in plugins included (webhooks only if their
//     reinvocationPolicy is IfNeeded). On that second pass the plugin finds its
//     kube-api-access-* volume and mounts it into every container added since that
//     mounts nothing at the path: a container a webhook adds gets the repo-server's
//     default token unless it mounts something there.
//   - Hence the injector's empty cmp-injector-no-token mount in the copy container
//     and every sidecar, and a catalog projected volume in its place where a plugin
//     mounts one there; with automountServiceAccountToken false nothing is added on
//     either pass.
//
// tokenAudience and tokenPath are the Vault-style token the kustomize plugin gets
// from the catalog; trivial-cmp instead mounts an audience-bound token at the
// default path (as argocd-vault-plugin reads it).
const (
	tokenAudience   = "vault"
	tokenMountPath  = "/var/run/secrets/vault"
	tokenVolume     = "vault"
	defaultPathVol  = "sa"
	addedByWebhook  = "added-by-webhook"
	apiAccessPrefix = "kube-api-access-"
)

var tokenExpiry = int64(600)

// TestServiceAccountTokens: an injected repo-server pod read back from the real
// apiserver (ServiceAccount admission on, a second webhook adding a container of
// its own), with automountServiceAccountToken true and false and with native and
// classic sidecars: the repo-server keeps its default token, no injected container
// ever mounts it, a catalog projected token is mounted where the catalog says, and
// the other webhook's container does get the default token (the reinvocation).
func TestServiceAccountTokens(t *testing.T) {
	c := env.cp.Client()
	addContainerWebhook(t)
	for _, native := range []bool{true, false} {
		t.Run(fmt.Sprintf("native=%v", native), func(t *testing.T) {
			startInjector(t, tokenCatalog(t, native))
			ns := newNamespace(t, "satoken", enabledNS)
			waitActive(t, ns)
			waitContainerAdded(t, ns)
			// The token volume projects kube-root-ca.crt: the kubelet would not
			// start a pod whose ConfigMap is missing.
			if err := harness.Eventually(30*time.Second, 20*time.Millisecond, func() (bool, error) {
				err := c.Get("/api/v1/namespaces/"+ns+"/configmaps/kube-root-ca.crt", nil)
				return err == nil, err
			}); err != nil {
				t.Fatal(err)
			}
			for _, automount := range []bool{true, false} {
				t.Run(fmt.Sprintf("automount=%v", automount), func(t *testing.T) {
					pod := loadPod(t, "repo-server-pod.yaml")
					pod.Name = fmt.Sprintf("automount-%v", automount)
					pod.Annotations[keys.PluginsAnnotation] = "helm, kustomize, trivial-cmp"
					pod.Spec.AutomountServiceAccountToken = &automount
					checkTokenMounts(t, createStored(t, ns, pod), automount)
				})
			}
		})
	}
}

// createServiceAccountOf creates in ns the ServiceAccount that the golden input
// workload file's pods name (argo-helm's argocd-repo-server, the operator's
// example-argocd-argocd-repo-server), as the install that renders it does.
func createServiceAccountOf(t *testing.T, ns, file string) {
	t.Helper()
	if sa := goldenPod(t, file).Spec.ServiceAccountName; sa != "" {
		if err := env.cp.Client().CreateServiceAccount(ns, sa); err != nil {
			t.Fatal(err)
		}
	}
}

// tokenCatalog is the example catalog with two projected tokens: kustomize's at
// its own path, trivial-cmp's at the default token path.
func tokenCatalog(t *testing.T, native bool) []byte {
	t.Helper()
	cat := map[string]any{}
	if err := yaml.Unmarshal(catalogFor(t, native, map[string][]string{"*": {"helm", "kustomize", "trivial-cmp"}}), &cat); err != nil {
		t.Fatal(err)
	}
	projected := func(name, mountPath string) map[string]any {
		return map[string]any{"name": name, "mountPath": mountPath, "projected": map[string]any{"sources": []any{
			map[string]any{"serviceAccountToken": map[string]any{"audience": tokenAudience, "expirationSeconds": tokenExpiry, "path": "token"}},
		}}}
	}
	plugins := cat["plugins"].(map[string]any)
	plugins["kustomize"].(map[string]any)["volumes"] = []any{projected(tokenVolume, tokenMountPath)}
	plugins["trivial-cmp"].(map[string]any)["volumes"] = []any{projected(defaultPathVol, keys.ServiceAccountTokenDir)}
	b, err := yaml.Marshal(cat)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkTokenMounts asserts what each container of the stored pod mounts at the
// default token path, and the catalog token.
func checkTokenMounts(t *testing.T, pod *corev1.Pod, automount bool) {
	t.Helper()
	if pod.Spec.ServiceAccountName != harness.DefaultServiceAccount {
		t.Errorf("serviceAccountName = %q, want %q (set by the ServiceAccount admission plugin)", pod.Spec.ServiceAccountName, harness.DefaultServiceAccount)
	}
	vols := map[string]corev1.Volume{}
	apiAccess := ""
	for _, v := range pod.Spec.Volumes {
		vols[v.Name] = v
		if strings.HasPrefix(v.Name, apiAccessPrefix) {
			if apiAccess != "" {
				t.Errorf("two default token volumes: %s and %s", apiAccess, v.Name)
			}
			apiAccess = v.Name
		}
	}
	switch {
	case automount && apiAccess == "":
		t.Fatalf("automount true but no %s* volume: %v", apiAccessPrefix, volumeNames(pod))
	case !automount && apiAccess != "":
		t.Errorf("automount false but the pod has %s", apiAccess)
	case automount && !projectsDefaultToken(vols[apiAccess]):
		t.Errorf("%s is not the default token projection: %+v", apiAccess, vols[apiAccess].VolumeSource)
	}
	if v := vols[keys.NoTokenVolume]; v.EmptyDir == nil {
		t.Errorf("%s is not an emptyDir: %+v", keys.NoTokenVolume, v.VolumeSource)
	}
	checkCatalogToken(t, vols[keys.PluginVolumeName("kustomize", tokenVolume)])
	checkCatalogToken(t, vols[keys.PluginVolumeName("trivial-cmp", defaultPathVol)])

	// What each container mounts at the default token path; "" is nothing.
	want := map[string]string{
		keys.CopyInitContainer:             keys.NoTokenVolume,
		keys.SocketsContainer:              keys.NoTokenVolume,
		keys.SidecarPrefix + "helm":        keys.NoTokenVolume,
		keys.SidecarPrefix + "kustomize":   keys.NoTokenVolume,
		keys.SidecarPrefix + "trivial-cmp": keys.PluginVolumeName("trivial-cmp", defaultPathVol),
		// The pod's own containers and the other webhook's: the default token
		// exactly when the pod automounts it.
		"copyutil":           apiAccess,
		"argocd-repo-server": apiAccess,
		addedByWebhook:       apiAccess,
	}
	seen := map[string]bool{}
	for _, ctr := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		w, ok := want[ctr.Name]
		if !ok {
			t.Errorf("unexpected container %s", ctr.Name)
			continue
		}
		seen[ctr.Name] = true
		injected := ctr.Name == keys.CopyInitContainer || strings.HasPrefix(ctr.Name, keys.SidecarPrefix)
		var at []corev1.VolumeMount
		for _, m := range ctr.VolumeMounts {
			if m.MountPath == keys.ServiceAccountTokenDir {
				at = append(at, m)
			}
			if injected && strings.HasPrefix(m.Name, apiAccessPrefix) {
				t.Errorf("%s mounts the repo-server's default token %s at %s", ctr.Name, m.Name, m.MountPath)
			}
		}
		t.Logf("%s: %v at %s", ctr.Name, mountNames(at), keys.ServiceAccountTokenDir)
		switch {
		case w == "" && len(at) != 0:
			t.Errorf("%s mounts %v at %s, want nothing", ctr.Name, at, keys.ServiceAccountTokenDir)
		case w != "" && (len(at) != 1 || at[0].Name != w || !at[0].ReadOnly):
			t.Errorf("%s mounts %+v at %s, want only %s read-only", ctr.Name, at, keys.ServiceAccountTokenDir, w)
		}
		if ctr.Name == keys.SidecarPrefix+"kustomize" && !mounts(ctr, keys.PluginVolumeName("kustomize", tokenVolume), tokenMountPath) {
			t.Errorf("%s does not mount its catalog token at %s: %+v", ctr.Name, tokenMountPath, ctr.VolumeMounts)
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("container %s missing from the stored pod", name)
		}
	}
}

// projectsDefaultToken: the volume the ServiceAccount plugin adds (a bound token,
// the cluster CA, the namespace).
func projectsDefaultToken(v corev1.Volume) bool {
	if v.Projected == nil || len(v.Projected.Sources) != 3 {
		return false
	}
	s := v.Projected.Sources
	return s[0].ServiceAccountToken != nil && s[0].ServiceAccountToken.Audience == "" && s[0].ServiceAccountToken.Path == "token" &&
		s[1].ConfigMap != nil && s[1].ConfigMap.Name == "kube-root-ca.crt" && s[2].DownwardAPI != nil
}

// checkCatalogToken: a catalog projected token volume as stored.
func checkCatalogToken(t *testing.T, v corev1.Volume) {
	t.Helper()
	if v.Projected == nil || len(v.Projected.Sources) != 1 || v.Projected.Sources[0].ServiceAccountToken == nil {
		t.Errorf("volume %q is not the catalog's projected token: %+v", v.Name, v.VolumeSource)
		return
	}
	tok := v.Projected.Sources[0].ServiceAccountToken
	if tok.Audience != tokenAudience || tok.ExpirationSeconds == nil || *tok.ExpirationSeconds != tokenExpiry || tok.Path != "token" {
		t.Errorf("volume %s token = %+v, want audience %s, %ds, path token", v.Name, tok, tokenAudience, tokenExpiry)
	}
}

func mounts(c corev1.Container, volume, path string) bool {
	for _, m := range c.VolumeMounts {
		if m.Name == volume && m.MountPath == path && m.ReadOnly {
			return true
		}
	}
	return false
}

func mountNames(ms []corev1.VolumeMount) []string {
	names := []string{}
	for _, m := range ms {
		names = append(names, m.Name)
	}
	return names
}

func volumeNames(pod *corev1.Pod) []string {
	var names []string
	for _, v := range pod.Spec.Volumes {
		names = append(names, v.Name)
	}
	return names
}

// addContainerWebhook registers a second mutating webhook, called after ours
// (configurations run in name order), that appends a container mounting
// nothing to every labelled pod: the stand-in for any other injector, through
// which the ServiceAccount plugin's second pass shows.
func addContainerWebhook(t *testing.T) {
	t.Helper()
	patch, err := json.Marshal([]map[string]any{{"op": "add", "path": "/spec/containers/-",
		"value": corev1.Container{Name: addedByWebhook, Image: "busybox:1.37"}}})
	if err != nil {
		t.Fatal(err)
	}
	url, ca, _ := patchingWebhook(t, patch)
	const name = "zz-e2e-add-container"
	cfg := map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
		"metadata": map[string]any{"name": name},
		"webhooks": []any{map[string]any{
			"name": "add-container.e2e.cmp-injector.io", "admissionReviewVersions": []any{"v1"},
			"sideEffects": "None", "failurePolicy": "Fail", "reinvocationPolicy": "Never",
			"clientConfig":   map[string]any{"url": url, "caBundle": ca},
			"objectSelector": map[string]any{"matchLabels": map[string]any{keys.InjectLabel: keys.EnabledValue}},
			"rules": []any{map[string]any{"apiGroups": []any{""}, "apiVersions": []any{"v1"},
				"operations": []any{"CREATE"}, "resources": []any{"pods"}}},
		}},
	}
	c := env.cp.Client()
	if err := c.Apply(webhookPath, name, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(webhookPath + "/" + name) })
}

// waitContainerAdded waits until the apiserver calls the second webhook.
func waitContainerAdded(t *testing.T, ns string) {
	t.Helper()
	c := env.cp.Client()
	if err := harness.Eventually(30*time.Second, 20*time.Millisecond, func() (bool, error) {
		got, err := c.CreatePod(ns, loadPod(t, "repo-server-pod.yaml"), true)
		if err != nil {
			return false, err
		}
		_, mains := containerNames(got)
		return countNames(mains, addedByWebhook) == 1, fmt.Errorf("second webhook not active: containers %v", mains)
	}); err != nil {
		t.Fatal(err)
	}
}
