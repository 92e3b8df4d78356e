package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
	"github.com/cmp-injector/cmp-injector/test/sopstest"
)

// Secrets stay secret (issue 25, item 4): a plugin gets three Secret values
// the three ways the catalog gives them (envFrom, env valueFrom.secretKeyRef,
// a secret volume), and its generate command fails after printing its env to
// stderr under set -x, the way a vault or helmfile error quoting a token does.
// Each value is random per run, so finding one anywhere is a leak: in the
// webhook's log and AdmissionReview answer, explain, inject and doctor, the
// log of every process (apiserver, injector, Argo CD's repo-server, the
// sidecar's cmp-server), the error Argo CD's repo-server returns, and the
// playground and `cmp-server run` given the sidecar's env. Where a value was
// printed, the error must carry its tag instead, or the test proves nothing.
// The key file's value is never printed by the plugin (cmp-server does not
// read files; a tool that prints its key leaks it): it must be nowhere.

const (
	leakyPlugin    = "leaky"
	leakyEnvSecret = "leaky-env"   // envFrom, no prefix: every key a variable
	leakyTokSecret = "leaky-token" // env valueFrom.secretKeyRef
	leakyKeySecret = "leaky-key"   // a secret volume
	leakyEnvVar    = "LEAKY_PASSWORD"
	leakyTokVar    = "VAULT_TOKEN"
	leakyKeyDir    = "/keys/leaky"
)

// leakyConfig is the plugin.yaml: no shell trick hides anything, it prints
// what a careless tool prints and says how large its key file is.
var leakyConfig = map[string]any{
	"apiVersion": "argoproj.io/v1alpha1", "kind": "ConfigManagementPlugin",
	"metadata": map[string]any{"name": leakyPlugin},
	"spec": map[string]any{"generate": map[string]any{"command": []any{"sh", "-c", `set -x
echo "login with token $VAULT_TOKEN and password $LEAKY_PASSWORD" >&2
env >&2
echo "key file: $(wc -c < "$KEY_FILE") bytes" >&2
exit 3`}}},
}

type plantedValues struct{ envFrom, keyRef, file string }

func (p plantedValues) each() map[string]string {
	return map[string]string{"envFrom " + leakyEnvVar: p.envFrom, "secretKeyRef " + leakyTokVar: p.keyRef, "secret volume file": p.file}
}

func TestSecretsStaySecret(t *testing.T) {
	planted := plantedValues{envFrom: sopstest.Planted(t), keyRef: sopstest.Planted(t), file: sopstest.Planted(t)}
	rels, err := harness.ArgoReleases()
	if err != nil {
		t.Fatal(err)
	}
	rel := rels[0]
	in := startInjector(t, leakyCatalog(t))
	ns := newNamespace(t, "secrets", enabledNS)
	waitActive(t, ns)
	argoConfig(t, ns, "secrets-redis")
	c := env.cp.Client()
	for name, data := range map[string]map[string]string{
		leakyEnvSecret: {leakyEnvVar: planted.envFrom},
		leakyTokSecret: {"token": planted.keyRef},
		leakyKeySecret: {"key.txt": planted.file},
	} {
		enc := map[string]any{}
		for k, v := range data {
			enc[k] = base64.StdEncoding.EncodeToString([]byte(v))
		}
		obj := map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": name}, "data": enc}
		if err := c.Apply("/api/v1/namespaces/"+ns+"/secrets", name, obj); err != nil {
			t.Fatal(err)
		}
	}
	tree := t.TempDir()
	if err := os.MkdirAll(filepath.Join(tree, leakyPlugin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, leakyPlugin, "app.txt"), []byte("an app\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	repoURL, commit, err := harness.GitRepo(filepath.Join(t.TempDir(), "git"), tree)
	if err != nil {
		t.Fatal(err)
	}
	s := &libraryStack{ns: ns, repoURL: repoURL, commit: commit, rels: rels}
	outputs := map[string]string{}

	// The webhook: its answer to a review of the pod, sent as the apiserver
	// sends it, and the pod the apiserver stored (references only).
	pod := repoServerPod(t, "repo-server-secrets", rel.Image(), leakyPlugin)
	outputs["the webhook's AdmissionReview answer"] = review(t, in, ns, pod)
	rs, stored := s.bootRepoServer(t, rel, leakyPlugin, "sec0")
	spec, _ := json.Marshal(stored)
	outputs["the stored pod"] = string(spec)
	sidecar := findSidecar(t, stored)
	rule := envValue(sidecar, keys.EnvSecretEnv)
	if want := leakyTokVar + ",*,!KEY_FILE"; rule != want {
		t.Errorf("%s = %q, want %q", keys.EnvSecretEnv, rule, want)
	}

	// Argo CD's repo-server asks the sidecar for the manifests.
	_, genErr := s.generate(rs, "leaky-app", leakyPlugin, &argoPlugin{Name: leakyPlugin})
	if genErr == nil {
		t.Fatal("the leaky plugin succeeded")
	}
	outputs["Argo CD's GenerateManifest error"] = genErr.Error()
	t.Logf("Argo CD says: %.600s…", genErr)
	for _, tag := range []string{"[redacted " + leakyEnvVar + "]", "[redacted " + leakyTokVar + "]", "key file: " + strconv.Itoa(len(planted.file)) + " bytes"} {
		if !strings.Contains(genErr.Error(), tag) {
			t.Errorf("Argo CD's error lacks %q: the sidecar did not get or print the value, so this proves nothing", tag)
		}
	}

	// The offline twins and doctor, on the pod and on the stored pod.
	podFile := filepath.Join(t.TempDir(), "pod.yaml")
	storedFile := filepath.Join(t.TempDir(), "stored.yaml")
	writeYAML(t, podFile, pod)
	writeYAML(t, storedFile, stored)
	for _, args := range [][]string{
		{"explain", "--catalog", in.Catalog, "--namespace", ns, "-f", podFile},
		{"explain", "--catalog", in.Catalog, "--namespace", ns, "-f", storedFile},
		{"inject", "--catalog", in.Catalog, "--namespace", ns, "-f", podFile},
		{"doctor", "--kubeconfig", env.cp.Kubeconfig, "--namespace", ns, "--catalog", in.Catalog},
		{"doctor", "--kubeconfig", env.cp.Kubeconfig, "--namespace", ns, "--catalog", in.Catalog, "-o", "json"},
	} {
		out, _ := exec.Command(env.bins["cmp-injector"], args...).CombinedOutput()
		outputs["cmp-injector "+strings.Join(args[:1], " ")+" "+args[len(args)-1]] = string(out)
	}

	// The playground and the local runner, given the sidecar's env as the
	// kubelet resolved it (the rule the injector wrote included).
	sidecarEnv := append(os.Environ(), leakyEnvVar+"="+planted.envFrom, leakyTokVar+"="+planted.keyRef,
		"KEY_FILE="+filepath.Join(rs.Pod.Volumes[keys.PluginVolumeName(leakyPlugin, "key")], "key.txt"), keys.EnvSecretEnv+"="+rule)
	config := filepath.Join(t.TempDir(), "plugin.yaml")
	writeYAML(t, config, leakyConfig)
	appDir := filepath.Join(tree, leakyPlugin)
	run := exec.Command(env.bins["cmp-server"], "run", "generate", "--config", config, "--app-dir", appDir, "--loglevel", "debug")
	run.Env = sidecarEnv
	out, _ := run.CombinedOutput()
	outputs["cmp-server run generate"] = string(out)
	page, pgLog := playgroundGenerate(t, config, appDir, sidecarEnv)
	outputs["the playground's answer"], outputs["the playground's log"] = page, pgLog
	for what, out := range map[string]string{"cmp-server run generate": string(out), "the playground's answer": page} {
		if !strings.Contains(out, "[redacted "+leakyTokVar+"]") {
			t.Errorf("%s lacks the tag: the value was not printed there, so this proves nothing:\n%.2000s", what, out)
		}
	}

	// Every process's own log: the webhook's review lines, the sidecar's
	// cmp-server, Argo CD's repo-server, the apiserver.
	for _, p := range rs.Pod.Processes() {
		outputs["the log of "+p.Name] = p.Output()
	}
	outputs["the injector's log"] = in.Output()
	all, err := os.ReadFile(env.logFile.Name())
	if err != nil {
		t.Fatal(err)
	}
	outputs["every process's log"] = string(all)

	for what, text := range outputs {
		for source, value := range planted.each() {
			for _, form := range []string{value, base64.StdEncoding.EncodeToString([]byte(value))} {
				if i := strings.Index(text, form); i >= 0 {
					t.Errorf("the %s value is in %s: …%s…", source, what, text[max(0, i-200):min(len(text), i+len(form)+50)])
				}
			}
		}
	}
	t.Logf("%d outputs searched for 3 planted values (each as is and in base64)", len(outputs))
}

// leakyCatalog is the example catalog plus the leaky plugin, enabled with
// helm (waitActive's probe pod asks for it) in every namespace.
func leakyCatalog(t *testing.T) []byte {
	t.Helper()
	cat := map[string]any{}
	if err := yaml.Unmarshal(catalogFor(t, true, map[string][]string{"*": {"helm", leakyPlugin}}), &cat); err != nil {
		t.Fatal(err)
	}
	cat["plugins"].(map[string]any)[leakyPlugin] = map[string]any{
		"image":   "busybox:1.37",
		"envFrom": []any{map[string]any{"secretRef": map[string]any{"name": leakyEnvSecret}}},
		"env": []any{
			map[string]any{"name": leakyTokVar, "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": leakyTokSecret, "key": "token"}}},
			map[string]any{"name": "KEY_FILE", "value": leakyKeyDir + "/key.txt"},
		},
		"volumes": []any{map[string]any{"name": "key", "mountPath": leakyKeyDir, "secret": map[string]any{"secretName": leakyKeySecret}}},
		"config":  map[string]any{"inline": leakyConfig},
	}
	b, err := yaml.Marshal(cat)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// review sends the injector an AdmissionReview of pod as the apiserver
// would and returns the answer's body.
func review(t *testing.T, in *harness.Injector, ns string, pod *corev1.Pod) string {
	t.Helper()
	p := pod.DeepCopy()
	p.Namespace = ns
	body, err := json.Marshal(map[string]any{
		"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
		"request": map[string]any{
			"uid": "secrets-review", "kind": map[string]any{"group": "", "version": "v1", "kind": "Pod"},
			"resource":  map[string]any{"group": "", "version": "v1", "resource": "pods"},
			"namespace": ns, "name": p.Name, "operation": "CREATE", "userInfo": map[string]any{"username": "admin"},
			"object": p, "dryRun": true,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := in.TLSClient().Post(in.URL(), "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	if _, err := out.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	var rev struct {
		Response struct {
			Allowed bool   `json:"allowed"`
			Patch   []byte `json:"patch"`
		} `json:"response"`
	}
	if err := json.Unmarshal(out.Bytes(), &rev); err != nil || !rev.Response.Allowed || len(rev.Response.Patch) == 0 {
		t.Fatalf("review answer (%v): %s", err, out.String())
	}
	// The patch is base64 in the answer: search it decoded too.
	return out.String() + "\n" + string(rev.Response.Patch)
}

// findSidecar is the leaky plugin's sidecar in the stored pod.
func findSidecar(t *testing.T, pod *corev1.Pod) corev1.Container {
	t.Helper()
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if c.Name == keys.SidecarName(leakyPlugin) {
			return c
		}
	}
	t.Fatalf("no %s container in the stored pod", keys.SidecarName(leakyPlugin))
	return corev1.Container{}
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func writeYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// playgroundGenerate starts `cmp-server playground` with cmdEnv, asks it for
// the manifests as the page does, stops it and returns its answer and log.
func playgroundGenerate(t *testing.T, config, appDir string, cmdEnv []string) (answer, log string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(env.bins["cmp-server"], "playground", "--config", config, "--app-dir", appDir, "--listen", addr, "--loglevel", "debug")
	var logs servingtest.SyncBuffer
	cmd.Env, cmd.Stdout, cmd.Stderr = cmdEnv, &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		<-exited
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	err = harness.Eventually(30*time.Second, 50*time.Millisecond, func() (bool, error) {
		resp, err := http.Get("http://" + addr + "/api/state")
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("the playground did not answer: %v\n%s", err, logs.String())
	}
	resp, err := http.Post("http://"+addr+"/api/generate", "application/json", strings.NewReader(`{"session":"secrets"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	if _, err := out.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	stop()
	return out.String(), logs.String()
}
