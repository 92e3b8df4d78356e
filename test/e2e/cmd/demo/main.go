// Command demo shows the product's main job on a machine with no cluster: a real
// etcd and kube-apiserver, the injector with the example catalog, a pod shaped
// like Argo CD's repo-server injected by the apiserver's call to the webhook, and
// that pod's Helm plugin sidecar booted locally and generating manifests through
// its socket. Run it with `make demo`.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/params"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) {
	fmt.Printf("\n==> "+format+"\n", args...)
}

func run() error {
	start := time.Now()
	repo, err := harness.RepoRoot()
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

	step("building cmp-injector and cmp-server")
	bins, err := harness.BuildBinaries(ctx, filepath.Join(root, "bin"), "cmp-injector", "cmp-server")
	if err != nil {
		return err
	}

	step("starting etcd and kube-apiserver on 127.0.0.1")
	cp, err := harness.StartControlPlane(filepath.Join(root, "cp"), logFile)
	if err != nil {
		return err
	}
	defer cp.Stop()
	ver, err := cp.Version()
	if err != nil {
		return err
	}
	fmt.Printf("kube-apiserver %s ready at %s\n", ver, cp.URL)

	step("starting cmp-injector serve with deploy/plugins/catalog.yaml and a certificate from cmp-injector certs")
	catalog, err := harness.ExampleCatalog(true, map[string][]string{"argocd": {"helm", "kustomize"}})
	if err != nil {
		return err
	}
	in, err := harness.NewInjector(bins["cmp-injector"], filepath.Join(root, "injector"), catalog, logFile)
	if err != nil {
		return err
	}
	if err := in.Start(); err != nil {
		return err
	}
	defer in.Stop()
	fmt.Printf("injector ready at %s\n", in.URL())

	step("installing the chart's MutatingWebhookConfiguration (helm template) and labelling namespace argocd")
	c := cp.Client()
	ca, err := in.CABundle()
	if err != nil {
		return err
	}
	if _, err := c.InstallWebhook(strings.TrimPrefix(ver, "v"), in.URL(), ca); err != nil {
		return err
	}
	if err := c.CreateNamespace("argocd", map[string]string{keys.NamespaceEnabledLabel: keys.EnabledValue}); err != nil {
		return err
	}
	pod, err := harness.LoadPod(filepath.Join(repo, "test", "e2e", "testdata", "repo-server-pod.yaml"))
	if err != nil {
		return err
	}
	if err := c.WaitInjecting("argocd", pod, 30*time.Second); err != nil {
		return err
	}

	step("creating a pod shaped like argocd-repo-server with %s: %s", keys.PluginsAnnotation, pod.Annotations[keys.PluginsAnnotation])
	if _, err := c.CreatePod("argocd", pod, false); err != nil {
		return err
	}
	stored, err := c.GetPod("argocd", pod.Name)
	if err != nil {
		return err
	}
	fmt.Println("the pod as the apiserver stored it (spec and annotations):")
	show := stored.DeepCopy()
	show.ManagedFields = nil
	out, err := yaml.Marshal(map[string]any{"metadata": map[string]any{"annotations": show.Annotations, "labels": show.Labels}, "spec": show.Spec})
	if err != nil {
		return err
	}
	os.Stdout.Write(out)

	step("booting the injected containers locally: %s, then the cmp-helm sidecar", keys.CopyInitContainer)
	booted, sockets, err := harness.BootInjectedPod(stored, bins["cmp-server"], filepath.Join(root, "pod"), io.Discard)
	if err != nil {
		return err
	}
	defer booted.Stop()
	entries, _ := os.ReadDir(sockets)
	for _, e := range entries {
		fmt.Printf("listening: %s\n", filepath.Join(keys.PluginSocketDir, e.Name()))
	}

	ps := []params.AppParameter{
		{Name: "values-files", Array: []string{"values-prod.yaml"}},
		{Name: "helm-parameters", Map: map[string]string{"message": "hello, from an Application parameter"}},
	}
	step("generating manifests for test/e2e/testdata/repo/apps/guestbook through helm.sock with parameters")
	env, err := harness.GuestbookApp(strings.TrimPrefix(ver, "v"), ps).Environ()
	if err != nil {
		return err
	}
	for _, e := range env {
		if strings.HasPrefix(e, keys.EnvAppParameters+"=") || strings.HasPrefix(e, "PARAM_") {
			fmt.Println(e)
		}
	}
	cl, err := client.Dial(ctx, filepath.Join(sockets, "helm.sock"))
	if err != nil {
		return err
	}
	defer cl.Close()
	manifests, err := cl.Generate(ctx, client.Request{
		RepoRoot: filepath.Join(repo, "test", "e2e", "testdata", "repo"), AppRelPath: "apps/guestbook", Env: env})
	if err != nil {
		return err
	}
	for _, m := range manifests {
		y, err := yaml.JSONToYAML([]byte(m))
		if err != nil {
			return err
		}
		fmt.Printf("---\n%s", y)
	}
	step("done in %s: %d manifests generated by the injected Helm plugin", time.Since(start).Round(time.Millisecond), len(manifests))
	return nil
}
