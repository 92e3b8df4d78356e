package adopt

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// renderCacheCase is the golden case whose catalog sets renderCache, one
// entry reading Secrets (so its sidecar also gets the injector's Secret rule).
var renderCacheCase = filepath.Join(goldenDir, "render-cache")

// Adopting what the injector made from a catalog with renderCache used to
// copy CMP_SERVER_RENDER_CACHE_* and CMP_SERVER_SECRET_ENV into the entries'
// env, which the catalog refuses: the adopted catalog did not load. It must
// load with the real loader and give back the same renderCache, with none of
// the injector's variables in env, and re-inject to the same pod.
func TestRoundTripRenderCache(t *testing.T) {
	srcCat, srcWorkload := filepath.Join(renderCacheCase, "source-catalog.yaml"), filepath.Join(renderCacheCase, "source-workload.yaml")
	checkRoundTrip(t, srcCat, srcWorkload)

	first := injected(t, srcWorkload, srcCat)
	for _, name := range catalog.InjectorEnv() {
		if !strings.Contains(string(first), name) {
			t.Errorf("the injected input lacks %s: the case no longer covers every variable adopt takes out of env", name)
		}
	}
	r, err := Adopt(first, goldenOptions)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(file, r.Catalog, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := catalog.Load(file)
	if err != nil {
		t.Fatalf("adopted catalog does not load: %v\n%s", err, r.Catalog)
	}
	src, err := catalog.Load(srcCat)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range src.Names {
		w, g := src.Plugins[n].RenderCache, got.Plugins[n].RenderCache
		if w == nil || g == nil || !equality.Semantic.DeepEqual(*w, *g) {
			t.Errorf("plugin %s renderCache: want %+v, got %+v", n, w, g)
		}
		assertNoInjectorEnv(t, n, got.Plugins[n].Env)
	}
	// Written as the admin would write it, not as the bytes the injector set.
	for _, want := range []string{"size: 64Mi", "size: 100M", "ttl: 1m30s"} {
		if !strings.Contains(string(r.Catalog), want) {
			t.Errorf("catalog.yaml lacks %q:\n%s", want, r.Catalog)
		}
	}
	if slices.ContainsFunc(r.Findings, func(f Finding) bool { return f.Code == CodeRenderCache || f.Code == CodeInjectorEnv }) {
		t.Errorf("our own output needs no note: %+v", r.Findings)
	}
}

// A render cache variable cmp-server refuses, or adopt cannot read, leaves
// the entry with no renderCache and none of the variables in env, says so,
// and the catalog still loads; the other plugin keeps its cache.
func TestRenderCacheBadValue(t *testing.T) {
	first := injected(t, filepath.Join(renderCacheCase, "source-workload.yaml"), filepath.Join(renderCacheCase, "source-catalog.yaml"))
	fromConfigMap := &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cache"}, Key: "size"}}
	for _, tc := range []struct {
		name string
		set  corev1.EnvVar
		sev  Severity
		want string
	}{
		{"size with a suffix", corev1.EnvVar{Name: keys.EnvRenderCacheSize, Value: "64Mi"}, Warning, `CMP_SERVER_RENDER_CACHE_SIZE="64Mi" is not a number of bytes`},
		{"negative size", corev1.EnvVar{Name: keys.EnvRenderCacheSize, Value: "-1"}, Warning, `CMP_SERVER_RENDER_CACHE_SIZE="-1" is not a number of bytes`},
		{"size from a ConfigMap", corev1.EnvVar{Name: keys.EnvRenderCacheSize, ValueFrom: fromConfigMap}, Warning, "CMP_SERVER_RENDER_CACHE_SIZE takes its value from valueFrom, which adopt cannot read"},
		{"ttl without a unit", corev1.EnvVar{Name: keys.EnvRenderCacheTTL, Value: "90"}, Warning, `CMP_SERVER_RENDER_CACHE_TTL="90" is not a positive duration such as 10m`},
		{"negative ttl", corev1.EnvVar{Name: keys.EnvRenderCacheTTL, Value: "-5m"}, Warning, `CMP_SERVER_RENDER_CACHE_TTL="-5m" is not a positive duration`},
		{"yes for true", corev1.EnvVar{Name: keys.EnvRenderCacheRevisionIndependent, Value: "yes"}, Warning, `CMP_SERVER_RENDER_CACHE_REVISION_INDEPENDENT="yes" is not true or false`},
		{"cache off", corev1.EnvVar{Name: keys.EnvRenderCacheSize, Value: "0"}, Info, "so its render cache was off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Adopt(withSidecarEnv(t, first, "kustomize", tc.set), goldenOptions)
			if err != nil {
				t.Fatal(err)
			}
			if r.Lost() {
				t.Errorf("essential findings: %+v", r.Findings)
			}
			i := slices.IndexFunc(r.Findings, func(f Finding) bool { return f.Code == CodeRenderCache })
			if i < 0 {
				t.Fatalf("no %s finding: %+v", CodeRenderCache, r.Findings)
			}
			if f := r.Findings[i]; f.Severity != tc.sev || f.Plugin != "kustomize" || !strings.Contains(f.Message, tc.want) {
				t.Errorf("finding %+v, want %s for kustomize saying %q", f, tc.sev, tc.want)
			}
			c, err := catalog.Parse(r.Catalog)
			if err != nil {
				t.Fatalf("adopted catalog does not load: %v\n%s", err, r.Catalog)
			}
			if rc := c.Plugins["kustomize"].RenderCache; rc != nil {
				t.Errorf("kustomize renderCache %+v, want none", rc)
			}
			assertNoInjectorEnv(t, "kustomize", c.Plugins["kustomize"].Env)
			if c.Plugins["vault"].RenderCache == nil {
				t.Error("vault lost its renderCache")
			}
		})
	}
}

// A hand-written sidecar that runs our server with its render cache env gets
// the same mapping, and notes for what it set that the catalog now sets.
func TestRenderCacheHandWritten(t *testing.T) {
	input := `apiVersion: apps/v1
kind: Deployment
metadata: {name: argocd-repo-server, namespace: argocd}
spec:
  selector: {matchLabels: {app: repo}}
  template:
    metadata: {labels: {app: repo}}
    spec:
      containers:
        - name: argocd-repo-server
          image: quay.io/argoproj/argocd:v3.1.8
          volumeMounts: [{name: plugins, mountPath: /home/argocd/cmp-server/plugins}]
        - name: cmp-jsonnet
          image: example.com/jsonnet:1
          command: [/var/run/argocd/argocd-cmp-server]
          env:
            - {name: JSONNET_PATH, value: /lib}
            - {name: CMP_SERVER_RENDER_CACHE_SIZE, value: "1048576"}
            - {name: CMP_SERVER_RENDER_CACHE_ALLOW_SECRETS, value: "false"}
            - {name: CMP_SERVER_SECRET_ENV, value: TOKEN}
          volumeMounts: [{name: plugins, mountPath: /home/argocd/cmp-server/plugins}]
      volumes: [{name: plugins, emptyDir: {}}]
`
	r, err := Adopt([]byte(input), goldenOptions)
	if err != nil {
		t.Fatal(err)
	}
	c, err := catalog.Parse(r.Catalog)
	if err != nil {
		t.Fatalf("adopted catalog does not load: %v\n%s", err, r.Catalog)
	}
	p := c.Plugins["jsonnet"]
	if rc := p.RenderCache; rc == nil || rc.Size.String() != "1Mi" || rc.TTL != nil || rc.RevisionIndependent || rc.AllowSecrets {
		t.Errorf("renderCache %+v, want size 1Mi only", rc)
	}
	if want := []corev1.EnvVar{{Name: "JSONNET_PATH", Value: "/lib"}}; !equality.Semantic.DeepEqual(p.Env, want) {
		t.Errorf("env %+v, want %+v", p.Env, want)
	}
	for _, code := range []Code{CodeRenderCache, CodeInjectorEnv} {
		if !slices.ContainsFunc(r.Findings, func(f Finding) bool { return f.Code == code && f.Severity == Info && f.Plugin == "jsonnet" }) {
			t.Errorf("no %s note: %+v", code, r.Findings)
		}
	}
}

func assertNoInjectorEnv(t *testing.T, plugin string, env []corev1.EnvVar) {
	t.Helper()
	reserved := catalog.InjectorEnv()
	for _, e := range env {
		if slices.Contains(reserved, e.Name) {
			t.Errorf("plugin %s env still sets %s", plugin, e.Name)
		}
	}
}

// withSidecarEnv is the injected Deployment stream with set in plugin's
// sidecar env in place of the variable of that name.
func withSidecarEnv(t *testing.T, stream []byte, plugin string, set corev1.EnvVar) []byte {
	t.Helper()
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(stream, &d); err != nil {
		t.Fatal(err)
	}
	spec := &d.Spec.Template.Spec
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			if list[i].Name != keys.SidecarName(plugin) {
				continue
			}
			if j := slices.IndexFunc(list[i].Env, func(e corev1.EnvVar) bool { return e.Name == set.Name }); j >= 0 {
				list[i].Env[j] = set
			} else {
				list[i].Env = append(list[i].Env, set)
			}
			out, err := yaml.Marshal(&d)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
	t.Fatalf("no sidecar %s", keys.SidecarName(plugin))
	return nil
}
