// Package packaging checks the chart and the plain manifests with
// the real helm and kustomize binaries (installed into bin/ by hack/tools.sh).
package packaging

import (
	"bytes"
	"fmt"
	corev1 "k8s.io/api/core/v1"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

func repo(t *testing.T) string { return harness.MustRepoRoot(t) }

func tool(t *testing.T, name string) string { return harness.MustTool(t, name) }

// run returns stdout, or fails the test with stderr.
func run(t *testing.T, dir string, argv ...string) string {
	t.Helper()
	out, err := runErr(dir, argv...)
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
	return out
}

func runErr(dir string, argv ...string) (string, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), &cmdError{err: err, stderr: stderr.String()}
	}
	return string(out), nil
}

type cmdError struct {
	err    error
	stderr string
}

func (e *cmdError) Error() string { return e.err.Error() + ": " + e.stderr }

func helmTemplate(t *testing.T, args ...string) (string, error) {
	t.Helper()
	r := repo(t)
	argv := append([]string{tool(t, "helm"), "template", "cmp-injector", filepath.Join(r, "charts", "cmp-injector"),
		"--namespace", "cmp-injector"}, args...)
	return runErr(r, argv...)
}

// docs splits a rendered stream into objects.
func docs(t *testing.T, rendered string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, d := range strings.Split(rendered, "\n---") {
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(d), &obj); err != nil {
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, d)
		}
		if len(obj) > 0 {
			out = append(out, obj)
		}
	}
	return out
}

func kinds(objs []map[string]any) []string {
	var k []string
	for _, o := range objs {
		k = append(k, o["kind"].(string))
	}
	sort.Strings(k)
	return k
}

func TestHelmLintStrict(t *testing.T) {
	r := repo(t)
	out := run(t, r, tool(t, "helm"), "lint", "--strict", filepath.Join(r, "charts", "cmp-injector"))
	if !strings.Contains(out, "0 chart(s) failed") {
		t.Errorf("helm lint: %s", out)
	}
}

func TestCertificateModesRender(t *testing.T) {
	// Two Roles and their bindings: the reconciler's Lease and the sidecar
	// probe of catalog.nativeSidecars: auto (TestSidecarProbeRBAC).
	cases := map[string]struct {
		args  []string
		kinds string
	}{
		"cert-manager default": {nil, "Certificate,Certificate,ClusterRole,ClusterRoleBinding,ConfigMap,Deployment,Issuer,Issuer,MutatingWebhookConfiguration,PodDisruptionBudget,Role,Role,RoleBinding,RoleBinding,Service,ServiceAccount"},
		"cert-manager with own issuer": {[]string{"--set", "certificates.certManager.issuerRef.name=corp", "--set", "certificates.certManager.issuerRef.kind=ClusterIssuer"},
			"Certificate,ClusterRole,ClusterRoleBinding,ConfigMap,Deployment,MutatingWebhookConfiguration,PodDisruptionBudget,Role,Role,RoleBinding,RoleBinding,Service,ServiceAccount"},
		"existing secret": {[]string{"--set", "certificates.mode=secret", "--set", "certificates.caBundle=Y2E="},
			"ClusterRole,ClusterRoleBinding,ConfigMap,Deployment,MutatingWebhookConfiguration,PodDisruptionBudget,Role,Role,RoleBinding,RoleBinding,Service,ServiceAccount"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := helmTemplate(t, append([]string{"--kube-version", "1.30.0"}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			objs := docs(t, out)
			if got := strings.Join(kinds(objs), ","); got != tc.kinds {
				t.Errorf("kinds = %s, want %s", got, tc.kinds)
			}
			for _, o := range objs {
				if o["kind"] != "MutatingWebhookConfiguration" {
					continue
				}
				wh := o["webhooks"].([]any)[0].(map[string]any)
				cc := wh["clientConfig"].(map[string]any)
				_, hasCA := cc["caBundle"]
				ann, _ := o["metadata"].(map[string]any)["annotations"].(map[string]any)
				_, injected := ann["cert-manager.io/inject-ca-from"]
				if hasCA == injected {
					t.Errorf("caBundle set: %v, cert-manager injection: %v; want exactly one", hasCA, injected)
				}
				for k, want := range map[string]any{"failurePolicy": "Fail", "sideEffects": "None", "timeoutSeconds": float64(10), "reinvocationPolicy": "IfNeeded"} {
					if wh[k] != want {
						t.Errorf("webhook %s = %v, want %v", k, wh[k], want)
					}
				}
				if _, ok := wh["matchConditions"]; !ok {
					t.Error("no matchConditions excluding the injector's own pods on 1.30")
				}
			}
		})
	}
	t.Run("secret mode without caBundle fails with a clear message", func(t *testing.T) {
		_, err := helmTemplate(t, "--set", "certificates.mode=secret")
		if err == nil || !strings.Contains(err.Error(), "certificates.caBundle is required") {
			t.Errorf("err = %v", err)
		}
	})
}

func TestValuesTypoFails(t *testing.T) {
	for _, set := range []string{"webhok.failurePolicy=Fail", "catalog.nativeSidecar=true", "webhook.failurePolicy=Sometimes", "replicaCount=two", "logFlushInterval=1 second"} {
		_, err := helmTemplate(t, "--set", set)
		if err == nil {
			t.Errorf("--set %s rendered; want a schema error", set)
			continue
		}
		if !strings.Contains(err.Error(), "cmp-injector:") {
			t.Errorf("--set %s: error is not a schema error: %v", set, err)
		}
	}
}

func TestRenderIsDeterministic(t *testing.T) {
	a, err := helmTemplate(t)
	if err != nil {
		t.Fatal(err)
	}
	b, err := helmTemplate(t)
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Error("two renders differ: the chart must not mint anything at render time")
	}
}

// catalog.nativeSidecars: auto is not decided by the version helm sees (v1.28
// with the SidecarContainers gate on has native sidecars, v1.29-v1.32 with it
// off has none): the catalog says auto, whatever the version, for the injector
// to ask its API server; true and false stay booleans. ("" is helm template
// without --kube-version.)
func TestNativeSidecarsAutoIsTheInjectors(t *testing.T) {
	for _, c := range []struct{ args, want string }{
		{"--kube-version=1.28.9", "auto"}, {"--kube-version=1.29.0", "auto"}, {"--kube-version=1.34.4", "auto"}, {"", "auto"},
		{"--set=kubeVersion=1.28.0", "auto"},
		{"--set=catalog.nativeSidecars=true", "true"}, {"--set=catalog.nativeSidecars=false", "false"},
		{"--set-string=catalog.nativeSidecars=false", "false"},
	} {
		args := []string{"--show-only", "templates/catalog-configmap.yaml"}
		if c.args != "" {
			args = append(args, c.args)
		}
		out, err := helmTemplate(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		body := docs(t, out)[0]["data"].(map[string]any)["catalog.yaml"].(string)
		var doc struct {
			Defaults struct {
				NativeSidecars any `json:"nativeSidecars"`
			} `json:"defaults"`
		}
		if err := yaml.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(doc.Defaults.NativeSidecars); got != c.want {
			t.Errorf("%s: defaults.nativeSidecars = %#v, want %s", c.args, doc.Defaults.NativeSidecars, c.want)
		}
		cat, err := catalog.Parse([]byte(body))
		if err != nil {
			t.Fatalf("%s: the rendered catalog does not load: %v", c.args, err)
		}
		if cat.Defaults.NativeSidecarsAuto != (c.want == "auto") || cat.Defaults.NativeSidecars != (c.want != "false") {
			t.Errorf("%s: loaded offline as %+v", c.args, cat.Defaults)
		}
	}
}

// TestSidecarProbeRBAC: with catalog.nativeSidecars: auto the injector may
// create pods in the release namespace, for its start-up dry run, and has a
// token and a way out to the API server even with the reconciler off; with
// true or false it has neither.
func TestSidecarProbeRBAC(t *testing.T) {
	render := func(args ...string) (probeRules []string, automount any, args2 string, egress any) {
		t.Helper()
		out, err := helmTemplate(t, append([]string{"--kube-version", "1.30.0", "--namespace", "cmp-injector", "--set", "reconciler.enabled=false", "--set", "networkPolicy.enabled=true"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range docs(t, out) {
			meta := o["metadata"].(map[string]any)
			switch o["kind"] {
			case "Role":
				if !strings.HasSuffix(meta["name"].(string), "-sidecar-probe") || meta["namespace"] != "cmp-injector" {
					t.Errorf("Role %v", meta)
				}
				for _, r := range o["rules"].([]any) {
					rule := r.(map[string]any)
					probeRules = append(probeRules, fmt.Sprintf("%v %v %v", rule["apiGroups"], rule["resources"], rule["verbs"]))
				}
			case "RoleBinding":
				if s := o["subjects"].([]any)[0].(map[string]any); s["kind"] != "ServiceAccount" || s["namespace"] != "cmp-injector" {
					t.Errorf("RoleBinding subjects %v", o["subjects"])
				}
			case "Deployment":
				spec := o["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
				automount, args2 = spec["automountServiceAccountToken"], fmt.Sprint(spec["containers"].([]any)[0].(map[string]any)["args"])
			case "NetworkPolicy":
				egress = o["spec"].(map[string]any)["egress"]
			}
		}
		return
	}
	rules, automount, args, egress := render()
	if strings.Join(rules, "; ") != "[] [pods] [create]" || automount != true ||
		!strings.Contains(args, "--sidecar-probe-namespace=cmp-injector") || fmt.Sprint(egress) == "[]" {
		t.Errorf("auto: rules %v, automount %v, args %s, egress %v", rules, automount, args, egress)
	}
	rules, automount, args, egress = render("--set", "catalog.nativeSidecars=true")
	if len(rules) != 0 || automount != false || strings.Contains(args, "--sidecar-probe") || fmt.Sprint(egress) != "[]" {
		t.Errorf("true: rules %v, automount %v, args %s, egress %v", rules, automount, args, egress)
	}
}

// A namespace naming a plugin the catalog does not define fails the render
// with the injector's own message, instead of an injector that never becomes
// ready.
func TestUnknownPluginFailsRender(t *testing.T) {
	_, err := helmTemplate(t, "--set", "catalog.namespaces.argocd[0]=helmm")
	want := `catalog: namespaces.argocd[0]: unknown plugin "helmm" (known: argocd-vault-plugin, cdk8s, helm, helmfile, jsonnet, kustomize, kustomize-helm, sops, tanka, trivial-cmp, ytt)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("render: %v, want %q", err, want)
	}
	// The injector says the same of the same catalog.
	_, err = catalog.Parse([]byte("apiVersion: cmp-injector.io/v1alpha1\nkind: PluginCatalog\nplugins:\n  helm: {image: a:1, config: {fromImage: true}}\n  kustomize: {image: a:1, config: {fromImage: true}}\nnamespaces:\n  argocd: [helmm]\n"))
	if err == nil || !strings.Contains(err.Error(), `namespaces.argocd[0]: unknown plugin "helmm" (known: helm, kustomize)`) {
		t.Errorf("injector: %v", err)
	}
}

func TestExampleCatalogShipped(t *testing.T) {
	r := repo(t)
	a, err := os.ReadFile(filepath.Join(r, "deploy", "plugins", "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(r, "charts", "cmp-injector", "files", "example-catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("charts/cmp-injector/files/example-catalog.yaml differs from deploy/plugins/catalog.yaml: run make chart")
	}
	if _, err := catalog.Parse(a); err != nil {
		t.Errorf("deploy/plugins/catalog.yaml does not load: %v", err)
	}
}

func TestValuesDocumented(t *testing.T) {
	r := repo(t)
	vb, err := os.ReadFile(filepath.Join(r, "charts", "cmp-injector", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(r, "charts", "cmp-injector", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]any{}
	if err := yaml.Unmarshal(vb, &values); err != nil {
		t.Fatal(err)
	}
	// Leaves, and maps documented as a whole, must each have a table row.
	var missing []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			key := prefix + k
			if strings.Contains(string(readme), "| `"+key+"` |") {
				continue
			}
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				walk(key+".", sub)
				continue
			}
			missing = append(missing, key)
		}
	}
	walk("", values)
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("values without a row in charts/cmp-injector/README.md: %v", missing)
	}
}

func TestDeployBaseMatchesChart(t *testing.T) {
	r := repo(t)
	want, err := os.ReadFile(filepath.Join(r, "deploy", "base", "cmp-injector.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := helmTemplate(t, "--kube-version", "1.30.0")
	if err != nil {
		t.Fatal(err)
	}
	got := "# Generated by hack/render-deploy.sh from charts/cmp-injector with default values. Do not edit.\n" + out
	if got != string(want) {
		t.Error("deploy/base/cmp-injector.yaml is stale: run hack/render-deploy.sh (make chart)")
	}
	built := run(t, r, tool(t, "kustomize"), "build", filepath.Join(r, "deploy", "base"))
	if k := strings.Join(kinds(docs(t, built)), ","); !strings.Contains(k, "MutatingWebhookConfiguration") || !strings.Contains(k, "Namespace") {
		t.Errorf("kustomize build deploy/base: kinds %s", k)
	}
}

// TestRepoServerComponent applies the component to a local stand-in of Argo CD's
// repo-server Deployment (the overlay itself pulls the upstream manifests).
func TestRepoServerComponent(t *testing.T) {
	r := repo(t)
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, filepath.Join(r, "deploy", "components", "argocd-repo-server"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"kustomization.yaml": "resources: [repo-server.yaml]\ncomponents: [" + rel + "]\n",
		"repo-server.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: argocd-repo-server}
spec:
  selector: {matchLabels: {app.kubernetes.io/name: argocd-repo-server}}
  template:
    metadata: {labels: {app.kubernetes.io/name: argocd-repo-server}}
    spec: {containers: [{name: argocd-repo-server, image: quay.io/argoproj/argocd:v3.1.8}]}
`,
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := run(t, dir, tool(t, "kustomize"), "build", "--load-restrictor", "LoadRestrictionsNone", dir)
	for _, want := range []string{"cmp-injector.io/inject: \"true\"", "cmp-injector.io/plugins: helm, kustomize", "app.kubernetes.io/name: argocd-repo-server"} {
		if !strings.Contains(out, want) {
			t.Errorf("component output lacks %q:\n%s", want, out)
		}
	}
}

// TestArgoOverlayBuildsOffline: deploy/overlays/argocd vendors Argo CD's install
// manifest of the release the end-to-end suite tests; the committed file is
// exactly what hack/argocd-install.sh produces, and the overlay builds with no
// network into an Argo CD whose repo-server asks for injection.
func TestArgoOverlayBuildsOffline(t *testing.T) {
	r := repo(t)
	fresh := filepath.Join(t.TempDir(), "argocd-install.yaml")
	run(t, r, filepath.Join(r, "hack", "argocd-install.sh"), fresh)
	want, err := os.ReadFile(fresh)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(r, "deploy", "overlays", "argocd", "argocd-install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("deploy/overlays/argocd/argocd-install.yaml is not what hack/argocd-install.sh produces: run it and commit")
	}
	versions, err := os.ReadFile(filepath.Join(r, "hack", "versions.sh"))
	if err != nil {
		t.Fatal(err)
	}
	pin := regexp.MustCompile(`(?m)^ARGOCD_VERSION=(\S+)$`).FindSubmatch(versions)
	if pin == nil {
		t.Fatal("hack/versions.sh has no ARGOCD_VERSION")
	}
	dir := filepath.Join(r, "deploy", "overlays", "argocd")
	out := run(t, dir, tool(t, "kustomize"), "build", dir)
	for _, want := range []string{"name: argocd-repo-server", "cmp-injector.io/inject: \"true\"",
		"cmp-injector.io/plugins: helm, kustomize", "image: quay.io/argoproj/argocd:" + string(pin[1])} {
		if !strings.Contains(out, want) {
			t.Errorf("overlay output lacks %q", want)
		}
	}
}

// TestReconcilerRBAC: the chart grants the reconciler exactly what it uses,
// Deployment patches only with rollout: auto, and nothing (no token, no RBAC)
// when it is off.
func TestReconcilerRBAC(t *testing.T) {
	rules := func(args ...string) (cluster, lease []string, dep map[string]any) {
		t.Helper()
		out, err := helmTemplate(t, append([]string{"--kube-version", "1.30.0"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range docs(t, out) {
			var list *[]string
			switch o["kind"] {
			case "ClusterRole":
				list = &cluster
			case "Role":
				list = &lease
			case "Deployment":
				dep = o
				continue
			default:
				continue
			}
			for _, r := range o["rules"].([]any) {
				rule := r.(map[string]any)
				*list = append(*list, fmt.Sprintf("%v %v %v", rule["apiGroups"], rule["resources"], rule["verbs"]))
			}
		}
		return cluster, lease, dep
	}
	podSpec := func(dep map[string]any) (automount any, args string) {
		spec := dep["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
		return spec["automountServiceAccountToken"], fmt.Sprint(spec["containers"].([]any)[0].(map[string]any)["args"])
	}
	cluster, lease, dep := rules("--set", "catalog.nativeSidecars=true") // no sidecar-probe Role (TestSidecarProbeRBAC)
	want := "[] [pods] [list watch patch]; [] [namespaces] [list watch]; [] [events] [create patch]; [apps] [replicasets deployments statefulsets] [get]"
	if got := strings.Join(cluster, "; "); got != want {
		t.Errorf("ClusterRole rules %s, want %s", got, want)
	}
	if got := strings.Join(lease, "; "); got != "[coordination.k8s.io] [leases] [get create update]" {
		t.Errorf("Role rules %s", got)
	}
	if auto, args := podSpec(dep); auto != true || !strings.Contains(args, "--reconcile") || !strings.Contains(args, "--rollout=off") {
		t.Errorf("reconciler on: automount %v, args %s", auto, args)
	}
	cluster, _, _ = rules("--set", "reconciler.rollout=auto", "--set", "catalog.nativeSidecars=true")
	if got := strings.Join(cluster, "; "); got != want+"; [apps] [deployments] [patch]" {
		t.Errorf("rollout auto: ClusterRole rules %s", got)
	}
	cluster, lease, dep = rules("--set", "reconciler.enabled=false", "--set", "catalog.nativeSidecars=true")
	if auto, args := podSpec(dep); len(cluster)+len(lease) != 0 || auto != false || strings.Contains(args, "--reconcile") {
		t.Errorf("reconciler off: rules %v %v, automount %v, args %s", cluster, lease, auto, args)
	}
}

// TestOpenShiftRender: the OpenShift install of the chart README renders an
// injector pod with no fixed UID and a catalog with the Assigned policy that
// the injector loads (no runAsUser beside it).
func TestOpenShiftRender(t *testing.T) {
	out, err := helmTemplate(t, "--kube-version", "1.30.0",
		"--set", "podSecurityContext.runAsUser=null", "--set", "podSecurityContext.runAsGroup=null",
		"--set", "catalog.runAsUserPolicy=Assigned", "--set", "catalog.tmpSizeLimit=1Gi")
	if err != nil {
		t.Fatal(err)
	}
	var catalogYAML string
	for _, d := range docs(t, out) {
		switch d["kind"] {
		case "Deployment":
			b, _ := yaml.Marshal(d)
			if strings.Contains(string(b), "runAsUser") || strings.Contains(string(b), "runAsGroup") {
				t.Errorf("the injector's Deployment sets a UID:\n%s", b)
			}
		case "ConfigMap":
			if data, ok := d["data"].(map[string]any); ok {
				if c, ok := data["catalog.yaml"].(string); ok {
					catalogYAML = c
				}
			}
		}
	}
	cat, err := catalog.Parse([]byte(catalogYAML))
	if err != nil {
		t.Fatalf("rendered catalog: %v\n%s", err, catalogYAML)
	}
	if cat.Defaults.RunAsUser != 0 || cat.Defaults.TmpSizeLimit == nil || cat.Defaults.TmpSizeLimit.String() != "1Gi" {
		t.Errorf("catalog defaults: runAsUser %d, tmpSizeLimit %v", cat.Defaults.RunAsUser, cat.Defaults.TmpSizeLimit)
	}
}

// TestTmpMediumRender: catalog.tmpMedium reaches the catalog's defaults, and
// the schema refuses a medium the catalog does not know.
func TestTmpMediumRender(t *testing.T) {
	out, err := helmTemplate(t, "--kube-version", "1.30.0", "--set", "catalog.tmpSizeLimit=256Mi", "--set", "catalog.tmpMedium=Memory")
	if err != nil {
		t.Fatal(err)
	}
	var catalogYAML string
	for _, d := range docs(t, out) {
		if data, ok := d["data"].(map[string]any); ok && d["kind"] == "ConfigMap" {
			if c, ok := data["catalog.yaml"].(string); ok {
				catalogYAML = c
			}
		}
	}
	cat, err := catalog.Parse([]byte(catalogYAML))
	if err != nil {
		t.Fatalf("rendered catalog: %v\n%s", err, catalogYAML)
	}
	if cat.Defaults.TmpMedium != corev1.StorageMediumMemory {
		t.Errorf("catalog defaults: tmpMedium %q, want Memory", cat.Defaults.TmpMedium)
	}
	if _, err := helmTemplate(t, "--set", "catalog.tmpMedium=Tmpfs"); err == nil || !strings.Contains(err.Error(), "tmpMedium") {
		t.Errorf("catalog.tmpMedium=Tmpfs rendered, or the error does not name the value: %v", err)
	}
}
