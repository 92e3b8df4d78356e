// Command demo runs the chain a platform engineer runs, for real, on a machine
// with no cluster: etcd, kube-apiserver and kube-controller-manager on loopback;
// `helm install` of the chart; the README's label and patch commands on a
// Deployment shaped like Argo CD's repo-server; the ReplicaSet's pod injected by
// the webhook; that pod booted with Argo CD's own repo-server (v3) next to the
// injected sidecars; and an Application rendered through the Helm plugin by a
// GenerateManifest call to Argo CD's repo-server. Run it with `make demo`.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

var last = time.Now()

// step prints what comes next and how long the previous step took.
func step(format string, args ...any) {
	fmt.Printf("    (%s)\n\n==> "+format+"\n", append([]any{time.Since(last).Round(time.Millisecond)}, args...)...)
	last = time.Now()
}

func run() error {
	start := time.Now()
	repo, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	argo, err := harness.NewestArgoRelease()
	if err != nil {
		return err
	}
	root, err := os.MkdirTemp("", "cmpdemo")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	logFile, err := os.Create(filepath.Join(root, "processes.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	testdata := filepath.Join(repo, "test", "e2e", "testdata")

	// Into the clone's bin/, where the README's commands look for them after
	// the demo.
	fmt.Println("==> building cmp-injector and cmp-server into bin/")
	bins, err := harness.BuildBinaries(ctx, filepath.Join(repo, "bin"), "cmp-injector", "cmp-server")
	if err != nil {
		return err
	}

	step("starting etcd, kube-apiserver and kube-controller-manager on 127.0.0.1")
	cp, err := harness.StartControlPlane(filepath.Join(root, "cp"), logFile)
	if err != nil {
		return err
	}
	defer cp.Stop()
	ver, err := cp.Version()
	if err != nil {
		return err
	}
	fmt.Printf("kube-apiserver %s ready at %s (kubeconfig %s)\n", ver, cp.URL, cp.Kubeconfig)

	step("helm install cmp-injector charts/cmp-injector -n cmp-injector --create-namespace (certificate from `cmp-injector certs` in a Secret)")
	chart, err := cp.InstallChart(bins["cmp-injector"], filepath.Join(root, "chart"), logFile)
	if err != nil {
		return err
	}
	defer func() { _ = chart.Uninstall() }()
	fmt.Print(harness.FirstLines(chart.Output, 6))
	fmt.Printf("the injector container of the Deployment helm stored is running, webhook at %s\n", chart.Injector.URL())

	step("Argo CD's side: Redis, argocd-cmd-params-cm and an argocd-repo-server Deployment (%s) in namespace argocd", argo.Image())
	c := cp.Client()
	redis, err := harness.StartRedis(filepath.Join(root, "redis"), "demo-redis-password", logFile)
	if err != nil {
		return err
	}
	defer redis.Stop()
	if err := c.CreateNamespace(harness.ArgoNamespace, nil); err != nil {
		return err
	}
	if err := c.ApplyFile(harness.ArgoNamespace, filepath.Join(testdata, "chain", "argocd-config.yaml"),
		map[string]string{"REDIS_ADDRESS": redis.Addr, "REDIS_PASSWORD": "demo-redis-password"}); err != nil {
		return err
	}
	if err := c.ApplyFile(harness.ArgoNamespace, filepath.Join(testdata, "chain", "argocd-repo-server.yaml"), argo.RepoServerSubst()); err != nil {
		return err
	}

	steps, err := harness.ReadReadme(repo)
	if err != nil {
		return err
	}
	step("the README's commands:\n    kubectl label namespace argocd %s=%s\n    kubectl -n argocd patch deployment argocd-repo-server --type merge -p '%s'",
		steps.LabelKey, steps.LabelValue, steps.Patch)
	if err := c.MergePatch("/api/v1/namespaces/"+harness.ArgoNamespace, steps.LabelPatch()); err != nil {
		return err
	}
	probe, err := harness.LoadPod(filepath.Join(testdata, "repo-server-pod.yaml"))
	if err != nil {
		return err
	}
	if err := c.WaitInjecting(harness.ArgoNamespace, probe, 30*time.Second); err != nil {
		return err
	}
	gen, err := c.PatchDeployment(harness.ArgoNamespace, harness.RepoServerName, steps.Patch, false)
	if err != nil {
		return err
	}
	r, err := c.WaitRollout(harness.ArgoNamespace, harness.RepoServerName, harness.RepoServerSelector, gen, 1, true, 60*time.Second)
	if err != nil {
		return err
	}
	pod := &r.Pods[0]
	fmt.Printf("the ReplicaSet controller created %s; the apiserver stored it injected:\n", pod.Name)
	for _, ctr := range pod.Spec.InitContainers {
		kind := "init"
		if ctr.RestartPolicy != nil {
			kind = "native sidecar"
		}
		fmt.Printf("  %-15s %-20s %s\n", kind, ctr.Name, strings.Join(append(append([]string{}, ctr.Command...), ctr.Args...), " "))
	}
	for _, ctr := range pod.Spec.Containers {
		fmt.Printf("  %-15s %-20s %s\n", "container", ctr.Name, strings.Join(append(append([]string{}, ctr.Command...), ctr.Args...), " "))
	}
	fmt.Printf("  %s: %s\n", keys.StatusAnnotation, pod.Annotations[keys.StatusAnnotation])

	step("booting the pod: Argo CD's copyutil, our copy init container, the plugin sidecars, then Argo CD's argocd-repo-server")
	rs, err := harness.BootRepoServer(c, pod, argo, bins["cmp-server"], filepath.Join(root, "pod"), logFile)
	if err != nil {
		return err
	}
	defer rs.Stop()
	sockets, _ := os.ReadDir(rs.Pod.Volumes[keys.PluginsVolume])
	for _, e := range sockets {
		// The pod's path, and where that volume really is on this machine.
		fmt.Printf("listening: %s (on this machine: %s)\n", filepath.Join(keys.PluginSocketDir, e.Name()),
			filepath.Join(rs.Pod.Volumes[keys.PluginsVolume], e.Name()))
	}
	fmt.Printf("argocd-repo-server %s serving gRPC at %s\n", argo.Version, rs.Addr)

	repoURL, commit, err := harness.GitRepo(filepath.Join(root, "git"), filepath.Join(testdata, "repo"))
	if err != nil {
		return err
	}
	req := map[string]any{
		"repo": map[string]any{"repo": repoURL}, "revision": "HEAD", "appName": "guestbook", "namespace": "demo",
		"kubeVersion": strings.TrimPrefix(ver, "v"), "apiVersions": []string{"v1", "apps/v1"},
		"projectName": "default", "projectSourceRepos": []string{"*"},
		"applicationSource": map[string]any{"repoURL": repoURL, "path": "apps/guestbook", "targetRevision": "HEAD",
			"plugin": map[string]any{"name": "helm", "parameters": []any{
				map[string]any{"name": "values-files", "array": []string{"values-prod.yaml"}},
				map[string]any{"name": "helm-parameters", "map": map[string]string{"message": "hello, from an Application parameter"}},
			}}},
	}
	b, _ := yaml.Marshal(req["applicationSource"])
	step("GenerateManifest on Argo CD's repo-server (as the application controller calls it) for an Application of commit %s:\n%s", commit[:12], indent(string(b)))
	var resp struct {
		Manifests  []string `json:"manifests"`
		Revision   string   `json:"revision"`
		SourceType string   `json:"sourceType"`
	}
	if err := rs.Call("generate", req, &resp); err != nil {
		return err
	}
	for _, m := range resp.Manifests {
		y, err := yaml.JSONToYAML([]byte(m))
		if err != nil {
			return err
		}
		fmt.Printf("---\n%s", y)
	}
	fmt.Printf("Argo CD: source type %s, revision %s\n", resp.SourceType, resp.Revision)
	step("done in %s: Argo CD's repo-server rendered %d manifests through the injected Helm plugin",
		time.Since(start).Round(time.Millisecond), len(resp.Manifests))
	return nil
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n    ")
}
