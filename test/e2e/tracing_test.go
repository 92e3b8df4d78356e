package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/cmpserver/tracing"
	"github.com/cmp-injector/cmp-injector/cmpserver/tracing/otlptest"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// One trace from Argo CD's repo-server to the plugin's command: the admin
// sets otlp.address in argocd-cmd-params-cm, which Argo CD's repo-server reads
// (install.yaml's ARGOCD_REPO_SERVER_OTLP_ADDRESS) and the catalog entry's
// sidecar reads the same way (ARGOCD_CMP_SERVER_OTLP_ADDRESS, as README's
// tracing section shows). Both export to one real OTLP receiver; the
// sidecar's spans continue the repo-server's trace.

// otlpSidecarEnv is the catalog env README's tracing section gives a plugin:
// the otlp.* keys of argocd-cmd-params-cm, as Argo CD's own components read them.
func otlpSidecarEnv() []corev1.EnvVar {
	ref := func(name, key string) corev1.EnvVar {
		optional := true
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "argocd-cmd-params-cm"}, Key: key, Optional: &optional}}}
	}
	return []corev1.EnvVar{
		ref(keys.EnvCMPServerOTLPAddress, "otlp.address"),
		ref(keys.EnvCMPServerOTLPInsecure, "otlp.insecure"),
		ref(keys.EnvCMPServerOTLPHeaders, "otlp.headers"),
		ref(keys.EnvCMPServerOTLPAttrs, "otlp.attrs"),
		ref(keys.EnvCMPServerOTLPSampleRatio, "otlp.sample.ratio"),
	}
}

func TestOneTraceFromRepoServerToCommand(t *testing.T) {
	rels, err := harness.ArgoReleases()
	if err != nil {
		t.Fatal(err)
	}
	rel := rels[0]
	// Argo CD's CMP client propagates the trace context from v3.6 (argo-cd
	// #28365); earlier repo-servers trace their side alone.
	if olderThan(rel, "v3.6.0") {
		t.Skipf("Argo CD %s's CMP client sends no trace context", rel.Version)
	}
	recv, err := otlptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Stop()

	// The example catalog, its helm entry with the tracing env.
	cat := map[string]any{}
	if err := yaml.Unmarshal(catalogFor(t, true, map[string][]string{"*": {"helm"}}), &cat); err != nil {
		t.Fatal(err)
	}
	helm := cat["plugins"].(map[string]any)["helm"].(map[string]any)
	envs, _ := helm["env"].([]any)
	for _, e := range otlpSidecarEnv() {
		envs = append(envs, e)
	}
	helm["env"] = envs
	catYAML, err := yaml.Marshal(cat)
	if err != nil {
		t.Fatal(err)
	}
	startInjector(t, catYAML)
	ns := newNamespace(t, "tracing", enabledNS)
	waitActive(t, ns)
	argoConfig(t, ns, "tracing-redis")
	c := env.cp.Client()
	if err := c.MergePatch("/api/v1/namespaces/"+ns+"/configmaps/argocd-cmd-params-cm",
		[]byte(`{"data":{"otlp.address":"`+recv.Addr+`","otlp.attrs":"cluster:e2e"}}`)); err != nil {
		t.Fatal(err)
	}
	repoURL, _, err := harness.GitRepo(filepath.Join(t.TempDir(), "git"), libraryRepo)
	if err != nil {
		t.Fatal(err)
	}
	s := &libraryStack{ns: ns, repoURL: repoURL}
	rs, _ := s.bootRepoServer(t, rel, "helm", "trace")
	resp, err := s.generate(rs, "shop", "kustomize-helm/charts/hello", &argoPlugin{Name: "helm"})
	if err != nil || len(resp.Manifests) == 0 {
		t.Fatalf("generate: %v %v", resp.Manifests, err)
	}

	// Both sides export in batches (5 s by default).
	var cmd otlptest.Span
	if err := harness.Eventually(60*time.Second, 500*time.Millisecond, func() (bool, error) {
		for _, sp := range recv.Spans() {
			if sp.Service == tracing.ServiceName && sp.Name == tracing.SpanCommand && sp.Attributes[string(tracing.AttrPhase)] == "generate" {
				cmd = sp
			}
		}
		if cmd.TraceID == "" {
			return false, nil
		}
		return len(inTrace(recv.Spans(), cmd.TraceID, "argocd-repo-server")) > 0, nil
	}); err != nil {
		t.Fatalf("no trace with the plugin's generate command and the repo-server's spans: %v\nspans: %v", err, spanNames(recv.Spans()))
	}
	trace := recv.Spans()
	repoSide := inTrace(trace, cmd.TraceID, "argocd-repo-server")
	ours := inTrace(trace, cmd.TraceID, tracing.ServiceName)
	t.Logf("trace %s: repo-server %v; sidecar %v", cmd.TraceID, spanNames(repoSide), spanNames(ours))
	byID := map[string]otlptest.Span{}
	for _, sp := range trace {
		byID[sp.SpanID] = sp
	}
	// The chain: our server span's parent is the repo-server's client span
	// of the same RPC; the command's ancestors reach it.
	const rpc = "plugin.ConfigManagementPluginService/GenerateManifest"
	var server otlptest.Span
	for _, sp := range ours {
		if sp.Name == rpc {
			server = sp
		}
	}
	parent, ok := byID[server.ParentSpanID]
	if server.Name == "" || !ok || parent.Service != "argocd-repo-server" || parent.Name != rpc {
		t.Fatalf("the sidecar's %s span has parent %+v, want the repo-server's client span of it", rpc, parent)
	}
	hops := []string{cmd.Name}
	for sp := cmd; sp.SpanID != server.SpanID; {
		next, ok := byID[sp.ParentSpanID]
		if !ok {
			t.Fatalf("the command's ancestors stop at %v before the RPC's server span", hops)
		}
		sp = next
		hops = append(hops, sp.Name)
	}
	t.Logf("command to repo-server: %s ← %s (%s)", strings.Join(hops, " ← "), parent.Name, parent.Service)
	for _, sp := range ours {
		if sp.Name == tracing.SpanGenerate && (sp.Attributes[string(tracing.AttrApp)] != "shop" || sp.Attributes[string(tracing.AttrPlugin)] != "helm") {
			t.Errorf("%s attributes %v", sp.Name, sp.Attributes)
		}
	}
	if !hasName(repoSide, "reposerver.GenerateManifest") {
		t.Errorf("the trace lacks the repo-server's reposerver.GenerateManifest: %v", spanNames(repoSide))
	}
}

func inTrace(spans []otlptest.Span, traceID, service string) []otlptest.Span {
	var out []otlptest.Span
	for _, sp := range spans {
		if sp.TraceID == traceID && sp.Service == service {
			out = append(out, sp)
		}
	}
	return out
}

func spanNames(spans []otlptest.Span) []string {
	out := make([]string, len(spans))
	for i, sp := range spans {
		out[i] = sp.Service + ":" + sp.Name
	}
	return out
}

func hasName(spans []otlptest.Span, name string) bool {
	for _, sp := range spans {
		if sp.Name == name {
			return true
		}
	}
	return false
}
