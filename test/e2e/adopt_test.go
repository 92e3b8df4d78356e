package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// `cmp-injector adopt` end to end (issue 26 item 2): a repo-server Deployment
// with a CMP sidecar written by hand the way Argo CD documents it renders an
// Application through Argo CD's own repo-server; adopt, run as a user runs it
// on `kubectl get -o yaml` of that namespace, writes the catalog and the
// workload; the injector serves that catalog, the workload is applied, the
// Deployment controller's pod is injected and booted, and Argo CD's
// repo-server renders the same Applications to the same manifests.

// The hand-written plugin. It reaches everything adopt must carry over: the
// plugin.yaml from its ConfigMap (init, generate, discovery, version,
// parameters), the sidecar's env (a literal and one from a ConfigMap) and a
// Secret volume, and the repository Argo CD sends.
const (
	adoptPluginName = "render"
	// Argo CD names a versioned sidecar plugin <name>-<version>.
	adoptPluginRef  = adoptPluginName + "-v1"
	adoptSettingsCM = "render-settings"
	adoptSecret     = "render-credentials"
	adoptSecretPath = "/etc/render/credentials"
	adoptTeam       = "platform"
	adoptAppPath    = "apps/render"
)

// adoptPluginYAML is the plugin.yaml of the hand-written sidecar: init writes
// the team (sidecar env from a ConfigMap) into the checkout, kustomize builds
// the directory with it, and a ConfigMap reports what the command saw,
// including a fingerprint of the mounted Secret.
const adoptPluginYAML = `apiVersion: argoproj.io/v1alpha1
kind: ConfigManagementPlugin
metadata:
  name: ` + adoptPluginName + `
spec:
  version: v1
  init:
    command: [sh, -c]
    args: ['printf %s "$RENDER_TEAM" > team.txt']
  generate:
    command: [sh, -c]
    args:
      - |
        set -e
        if [ "$PARAM_GREETING" = fail ]; then echo "render: refusing to greet with fail" >&2; exit 3; fi
        kustomize build .
        echo ---
        fp=$(sha256sum < "$RENDER_CREDENTIALS/token" | cut -c1-16)
        printf '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%s-seen"},"data":{"namespace":"%s","revision":"%s","greeting":"%s","team":"%s","credential":"%s"}}\n' \
          "$ARGOCD_APP_NAME" "$ARGOCD_APP_NAMESPACE" "$ARGOCD_APP_REVISION" "$PARAM_GREETING" "$RENDER_TEAM" "$fp"
  discover:
    fileName: ./render.env
  parameters:
    static:
      - name: greeting
        title: Greeting
        string: hello
`

// adoptSidecarExtras is a strategic merge patch that gives the hand-made
// sidecar (argoSidecarPatch) its env and its Secret volume.
var adoptSidecarExtras = fmt.Sprintf(`{"spec":{"template":{"spec":{
	"containers":[{"name":%[1]q,
		"env":[{"name":"RENDER_TEAM","valueFrom":{"configMapKeyRef":{"name":%[2]q,"key":"team"}}},
			{"name":"RENDER_CREDENTIALS","value":%[4]q}],
		"volumeMounts":[{"name":"render-credentials","mountPath":%[4]q,"readOnly":true}]}],
	"volumes":[{"name":"render-credentials","secret":{"secretName":%[3]q}}]}}}}`,
	argoSidecar, adoptSettingsCM, adoptSecret, adoptSecretPath)

// adoptRepo writes the Application's directory: a Deployment and a
// ConfigMap generated from the file the plugin's init writes.
func adoptRepo(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	files := map[string]string{
		"render.env": "# marks the directory for the render plugin's discovery\n",
		"kustomization.yaml": `resources: [deployment.yaml]
configMapGenerator:
  - name: team
    files: [team.txt]
`,
		"deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: registry.example/web:1.2.3
`,
	}
	dir := filepath.Join(src, adoptAppPath)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

// adoptRender is what an Application sees of one request: its manifests
// canonicalised, or Argo CD's error text.
type adoptRender struct {
	Manifests []string
	Err       string
}

// adoptRenders sends the same requests through rs that the comparison
// needs: the plugin named with a parameter, discovery, the parameters
// announcement, a generate the plugin's command fails, and an Application
// path the plugin's discovery rule does not match.
func adoptRenders(t *testing.T, rs *harness.RepoServer, repoURL, commit string) map[string]adoptRender {
	t.Helper()
	request := func(app, path string, plugin *argoPlugin) manifestRequest {
		return manifestRequest{
			Repo: &argoRepo{Repo: repoURL}, Revision: "HEAD", NoCache: true,
			AppName: app, Namespace: "shop",
			ApplicationSource: &argoSource{RepoURL: repoURL, Path: path, TargetRevision: "HEAD", Plugin: plugin},
			KubeVersion:       kubeVersion(), APIVersions: []string{"v1", "apps/v1"},
			ProjectName: "default", ProjectSourceRepos: []string{"*"},
		}
	}
	out := map[string]adoptRender{}
	for name, req := range map[string]manifestRequest{
		"named": request("web-prod", adoptAppPath, &argoPlugin{Name: adoptPluginRef,
			Parameters: []argoParam{{Name: "greeting", String: strPtr("hello from prod")}}}),
		"discovered": request("web-disc", adoptAppPath, &argoPlugin{}),
		"refused": request("web-fail", adoptAppPath, &argoPlugin{Name: adoptPluginRef,
			Parameters: []argoParam{{Name: "greeting", String: strPtr("fail")}}}),
		"undiscovered": request("web-other", "apps", &argoPlugin{Name: adoptPluginRef}),
	} {
		var resp manifestResponse
		err := rs.Call("generate", req, &resp)
		var rpcErr *harness.RPCError
		switch {
		case errors.As(err, &rpcErr):
			out[name] = adoptRender{Err: rpcErr.Message}
		case err != nil:
			t.Fatalf("%s: %v", name, err)
		default:
			if resp.Revision != commit || resp.SourceType != "Plugin" {
				t.Errorf("%s: revision %q, source type %q; want %s and Plugin", name, resp.Revision, resp.SourceType, commit)
			}
			out[name] = adoptRender{Manifests: sortedManifests(t, resp.Manifests)}
		}
	}
	var details appDetailsResponse
	if err := rs.Call("appdetails", appDetailsQuery{Repo: &argoRepo{Repo: repoURL}, AppName: "web-prod", NoCache: true,
		Source: &argoSource{RepoURL: repoURL, Path: adoptAppPath, TargetRevision: "HEAD", Plugin: &argoPlugin{Name: adoptPluginRef}}}, &details); err != nil {
		t.Fatalf("GetAppDetails: %v", err)
	}
	out["announcement"] = adoptRender{Manifests: []string{string(mustJSON(details))}}
	return out
}

// checkHandWritten requires the hand-written sidecar's renders to show
// everything the comparison relies on, so that equal renders mean something.
func checkHandWritten(t *testing.T, got map[string]adoptRender, commit string) {
	t.Helper()
	named := strings.Join(got["named"].Manifests, "\n")
	for _, want := range []string{
		`"kind":"Deployment"`, `"name":"web"`,
		// The ConfigMap kustomize generated from the file init wrote.
		`"data":{"team.txt":"` + adoptTeam + `"}`,
		`"greeting":"hello from prod"`, `"team":"` + adoptTeam + `"`, `"revision":"` + commit + `"`, `"namespace":"shop"`,
	} {
		if !strings.Contains(named, want) {
			t.Errorf("the hand-written sidecar's render lacks %s:\n%s", want, named)
		}
	}
	if strings.Contains(named, `"credential":""`) || !strings.Contains(named, `"credential":"`) {
		t.Errorf("the plugin read no credential:\n%s", named)
	}
	if d := strings.Join(got["discovered"].Manifests, "\n"); !strings.Contains(d, `"name":"web-disc-seen"`) {
		t.Errorf("discovery did not choose the render plugin:\n%s", d)
	}
	if e := got["refused"].Err; !strings.Contains(e, "render: refusing to greet with fail") {
		t.Errorf("the failing command's error does not reach Argo CD: %q %v", e, got["refused"].Manifests)
	}
	if got["undiscovered"].Err == "" {
		t.Errorf("a path the discovery rule does not match rendered: %v", got["undiscovered"].Manifests)
	}
	if a := got["announcement"].Manifests[0]; !strings.Contains(a, `"name":"greeting"`) {
		t.Errorf("announcement %s lacks the greeting parameter", a)
	}
}

// kubectlGetYAML is what `kubectl -n NS get deploy/NAME cm secret -o yaml`
// prints: a v1 List of the objects as stored, without managedFields (kubectl
// hides them by default).
func kubectlGetYAML(t *testing.T, ns, deployment string) []byte {
	t.Helper()
	c := env.cp.Client()
	var items []any
	var dep map[string]any
	if err := c.Get(harness.DeploymentPath(ns, deployment), &dep); err != nil {
		t.Fatal(err)
	}
	dep["apiVersion"], dep["kind"] = "apps/v1", "Deployment"
	items = append(items, dep)
	for _, kind := range []string{"ConfigMap", "Secret"} {
		var list struct {
			Items []map[string]any `json:"items"`
		}
		if err := c.Get("/api/v1/namespaces/"+ns+"/"+strings.ToLower(kind)+"s", &list); err != nil {
			t.Fatal(err)
		}
		for _, o := range list.Items {
			o["apiVersion"], o["kind"] = "v1", kind
			items = append(items, o)
		}
	}
	for _, o := range items {
		delete(o.(map[string]any)["metadata"].(map[string]any), "managedFields")
	}
	b, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{"resourceVersion": ""}, "items": items})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// runAdopt runs the built `cmp-injector adopt` on input and returns its
// report (stdout), its exit code and the output directory.
func runAdopt(t *testing.T, input []byte) (report string, code int, outDir string) {
	t.Helper()
	dir := t.TempDir()
	in := filepath.Join(dir, "current.yaml")
	if err := os.WriteFile(in, input, 0o644); err != nil {
		t.Fatal(err)
	}
	outDir = filepath.Join(dir, "adopted")
	cmd := exec.Command(env.bins["cmp-injector"], "adopt", "-f", in, "--out-dir", outDir)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatal(err)
	}
	t.Logf("cmp-injector adopt exited %d; report:\n%s%s", code, stdout.String(), stderr.String())
	return stdout.String(), code, outDir
}

func TestAdoptThroughArgoCD(t *testing.T) {
	rel, err := harness.NewestArgoRelease()
	if err != nil {
		t.Fatal(err)
	}
	c := env.cp.Client()
	// Not opted in yet: the hand-written repo-server is stored as it is.
	ns := newNamespace(t, "adopt", nil)
	argoConfig(t, ns, "adopt-redis")
	repoURL, commit, err := harness.GitRepo(filepath.Join(t.TempDir(), "git"), adoptRepo(t))
	if err != nil {
		t.Fatal(err)
	}

	// 1. The hand-written sidecar: Argo CD's argocd-cmp-server copied by
	// copyutil, its plugin.yaml from a ConfigMap, its env and Secret.
	objects := map[string]map[string]any{
		"configmaps": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": argoSidecar + "-plugin"},
			"data": map[string]string{"plugin.yaml": adoptPluginYAML}},
		"secrets": {"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": adoptSecret},
			"stringData": map[string]string{"token": "s3cr3t-render-token"}},
	}
	settings := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": adoptSettingsCM},
		"data": map[string]string{"team": adoptTeam}}
	for coll, obj := range objects {
		if err := c.Apply("/api/v1/namespaces/"+ns+"/"+coll, obj["metadata"].(map[string]any)["name"].(string), obj); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Apply("/api/v1/namespaces/"+ns+"/configmaps", adoptSettingsCM, settings); err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyFile(ns, filepath.Join("testdata", "chain", "argocd-repo-server.yaml"), rel.RepoServerSubst()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PatchDeployment(ns, repoServer, []byte(argoSidecarPatch(rel.Image())), true); err != nil {
		t.Fatal(err)
	}
	gen, err := c.PatchDeployment(ns, repoServer, []byte(adoptSidecarExtras), true)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.WaitRollout(ns, repoServer, harness.RepoServerSelector, gen, 1, false, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	handPod := r.Pods[0]
	rs, err := harness.BootRepoServer(c, &handPod, rel, env.bins["cmp-server"], filepath.Join(env.root, "adopt-hand"), env.logFile)
	if err != nil {
		t.Fatal(err)
	}
	hand := adoptRenders(t, rs, repoURL, commit)
	rs.Stop()
	checkHandWritten(t, hand, commit)
	if t.Failed() {
		t.FailNow()
	}

	// 2. adopt, on what `kubectl get -o yaml` prints of the namespace.
	report, code, outDir := runAdopt(t, kubectlGetYAML(t, ns, repoServer))
	if code != 0 {
		t.Fatalf("adopt exited %d, want 0 (nothing essential lost)", code)
	}
	for _, want := range []string{
		fmt.Sprintf("adopted %s from Deployment %s/%s (%s)", argoSidecar, ns, repoServer, argoSidecar),
		fmt.Sprintf("removed from Deployment %s/%s: containers %s; init containers copyutil; volumes render-credentials, %[3]s, %[3]s-tmp, var-files\n",
			ns, repoServer, argoSidecar),
		"info [config_map_unused] ConfigMap " + ns + "/" + argoSidecar + "-plugin",
		"kubectl label namespace " + ns + " " + keys.NamespaceEnabledLabel + "=" + keys.EnabledValue,
		"nothing essential lost",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if strings.Contains(report, "essential [") {
		t.Errorf("the report names an essential loss with exit code 0")
	}
	catalog, err := os.ReadFile(filepath.Join(outDir, "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	workload, err := os.ReadFile(filepath.Join(outDir, "workload.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("adopted catalog.yaml:\n%s", catalog)

	// 3. The adopted catalog in the injector, the namespace opted in as the
	// report says, and the adopted workload applied.
	startInjector(t, catalog)
	if err := c.MergePatch("/api/v1/namespaces/"+ns, mustJSON(map[string]any{"metadata": map[string]any{
		"labels": map[string]string{keys.NamespaceEnabledLabel: keys.EnabledValue}}})); err != nil {
		t.Fatal(err)
	}
	// The apiserver learns of the webhook through an informer; the probe is
	// the adopted pod template itself (a dry-run create), since the example
	// catalog's plugins that waitActive asks for are not in this catalog.
	if err := c.WaitInjecting(ns, adoptedPodTemplate(t, workload), time.Minute); err != nil {
		t.Fatal(err)
	}
	gen = applyAdoptedWorkload(t, ns, workload)
	r, err = c.WaitRollout(ns, repoServer, harness.RepoServerSelector, gen, 1, true, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	injected := r.Pods[0]
	st := status(t, &injected)
	if strings.Join(st.Plugins, ",") != argoSidecar {
		t.Fatalf("the adopted pod is injected with %v, want [%s]", st.Plugins, argoSidecar)
	}
	for _, ctr := range append(injected.Spec.InitContainers, injected.Spec.Containers...) {
		if ctr.Name == argoSidecar || ctr.Name == "copyutil" {
			t.Errorf("the adopted pod still runs the hand-written %s", ctr.Name)
		}
	}
	rs, err = harness.BootRepoServer(c, &injected, rel, env.bins["cmp-server"], filepath.Join(env.root, "adopt-inj"), env.logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Stop()
	adopted := adoptRenders(t, rs, repoURL, commit)

	// 4. The same renders, through the same Argo CD repo-server.
	// Errors too: what Argo CD shows on the Application must not change.
	for name, h := range hand {
		a := adopted[name]
		hm, am := strings.Join(h.Manifests, "\n"), strings.Join(a.Manifests, "\n")
		if hm != am || h.Err != a.Err {
			t.Errorf("%s: the adopted plugin answers differently:\n--- hand-written (error %q)\n%s\n--- adopted (error %q)\n%s", name, h.Err, hm, a.Err, am)
		}
	}
	if t.Failed() {
		return
	}
	t.Logf("as expected, the adopted plugin answers as the hand-written one did: %d manifests for the named Application; Argo CD's errors:\n  %s\n  %s",
		len(adopted["named"].Manifests), adopted["refused"].Err, adopted["undiscovered"].Err)
}

// applyAdoptedWorkload applies each object of adopt's workload.yaml in ns as
// `kubectl apply` would over the live object (its resourceVersion, not the
// one `kubectl get` printed, which the controllers have moved on from), and
// returns the Deployment's new generation.
func applyAdoptedWorkload(t *testing.T, ns string, workload []byte) int64 {
	t.Helper()
	c := env.cp.Client()
	var gen int64
	for _, doc := range strings.Split(string(workload), "\n---\n") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		if obj == nil {
			continue
		}
		meta := obj["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		if kind := obj["kind"]; kind != "Deployment" {
			t.Fatalf("workload.yaml holds a %v %s; this test applies the Deployment only", kind, name)
		}
		delete(meta, "resourceVersion")
		if err := c.Apply("/apis/apps/v1/namespaces/"+ns+"/deployments", name, obj); err != nil {
			t.Fatal(err)
		}
		var dep struct {
			Metadata struct {
				Generation int64 `json:"generation"`
			} `json:"metadata"`
		}
		if err := c.Get(harness.DeploymentPath(ns, name), &dep); err != nil {
			t.Fatal(err)
		}
		gen = dep.Metadata.Generation
	}
	if gen == 0 {
		t.Fatal("workload.yaml holds no Deployment")
	}
	return gen
}

// adoptedPodTemplate is the pod of adopt's workload.yaml, which must hold
// the repo-server Deployment alone.
func adoptedPodTemplate(t *testing.T, workload []byte) *corev1.Pod {
	t.Helper()
	var dep appsv1.Deployment
	if err := yaml.UnmarshalStrict(workload, &dep); err != nil {
		t.Fatalf("workload.yaml is not one Deployment: %v\n%s", err, workload)
	}
	pod := &corev1.Pod{ObjectMeta: *dep.Spec.Template.ObjectMeta.DeepCopy(), Spec: *dep.Spec.Template.Spec.DeepCopy()}
	pod.Name = "probe"
	return pod
}
