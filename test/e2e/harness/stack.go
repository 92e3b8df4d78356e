package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// WebhookConfigurations is the collection path of MutatingWebhookConfigurations.
const WebhookConfigurations = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"

// ExampleCatalog returns the shipped example catalog (deploy/plugins/catalog.yaml)
// with a fixed revision, the given sidecar mode and namespace policy: the tests
// and the demo prove the catalog users start from.
func ExampleCatalog(nativeSidecars bool, namespaces map[string][]string) ([]byte, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy", "plugins", "catalog.yaml"))
	if err != nil {
		return nil, err
	}
	cat := map[string]any{}
	if err := yaml.Unmarshal(b, &cat); err != nil {
		return nil, err
	}
	cat["revision"] = "e2e"
	defaults, _ := cat["defaults"].(map[string]any)
	if defaults == nil {
		defaults = map[string]any{}
		cat["defaults"] = defaults
	}
	defaults["nativeSidecars"] = nativeSidecars
	cat["namespaces"] = namespaces
	return yaml.Marshal(cat)
}

// InstallWebhook renders the chart's MutatingWebhookConfiguration for the
// injector at url with caBundle (base64) and applies it; it returns its name.
func (c *Client) InstallWebhook(kubeVersion, url, caBundle string, set ...string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	mwc, err := RenderWebhook(filepath.Join(root, "charts", "cmp-injector"), kubeVersion, url, caBundle, set...)
	if err != nil {
		return "", err
	}
	name, _ := mwc["metadata"].(map[string]any)["name"].(string)
	if err := c.Apply(WebhookConfigurations, name, mwc); err != nil {
		return "", fmt.Errorf("apply webhook: %w", err)
	}
	return name, nil
}

// WaitInjecting polls with server-side dry-run creates of pod in ns until the
// apiserver calls the webhook (it learns of configurations through an informer).
func (c *Client) WaitInjecting(ns string, pod *corev1.Pod, timeout time.Duration) error {
	return Eventually(timeout, 20*time.Millisecond, func() (bool, error) {
		got, err := c.CreatePod(ns, pod.DeepCopy(), true)
		if err != nil {
			return false, err
		}
		_, ok := got.Annotations[keys.StatusAnnotation]
		return ok, errors.New("webhook not active yet")
	})
}

// LoadPod reads a Pod manifest strictly.
func LoadPod(path string) (*corev1.Pod, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pod := &corev1.Pod{}
	if err := yaml.UnmarshalStrict(b, pod); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return pod, nil
}

// BootInjectedPod boots the containers the injector owns in a stored pod (the
// copy init container, if any, and every cmp-<plugin> sidecar), with cmpServer
// standing in for the cmp-server binary of the copy image and of the plugin
// images that carry it (/usr/local/bin/cmp-server in both), and waits for
// every plugin socket.
// Argo CD's own containers are not run: their images are not on this machine.
func BootInjectedPod(pod *corev1.Pod, cmpServer, root string, logTo interface{ Write([]byte) (int, error) }) (*BootedPod, string, error) {
	owned := map[string]bool{}
	raw := pod.Annotations[keys.StatusAnnotation]
	var st inject.Status
	if err := json.Unmarshal([]byte(raw), &st); err != nil || raw == "" {
		return nil, "", fmt.Errorf("pod has no readable %s annotation: %w", keys.StatusAnnotation, err)
	}
	for _, n := range append(st.Containers, st.InitContainers...) {
		owned[n] = true
	}
	repo, err := RepoRoot()
	if err != nil {
		return nil, "", err
	}
	b, err := BootPod(pod, BootOptions{
		// The plugin images carry helm and kustomize; here they are the pinned
		// ones in bin/.
		Env:       []string{"PATH=" + filepath.Join(repo, "bin") + string(os.PathListSeparator) + os.Getenv("PATH")},
		Root:      root,
		Images:    map[string]string{keys.CopyServerBinary: cmpServer},
		Run:       func(name string) bool { return owned[name] },
		ConfigDir: keys.PluginConfigDir,
		// Argo CD's name for the flag, which cmp-server also takes.
		ConfigDirFlag: "--config-dir-path",
		SocketDir:     keys.PluginSocketDir,
		SocketDirEnv:  keys.EnvPluginSockFilePath,
		LogTo:         logTo,
	})
	if err != nil {
		return nil, "", err
	}
	sockets, ok := b.Volumes[keys.PluginsVolume]
	if !ok {
		b.Stop()
		return nil, "", fmt.Errorf("pod has no %s volume", keys.PluginsVolume)
	}
	err = Eventually(30*time.Second, 50*time.Millisecond, func() (bool, error) {
		for _, p := range b.Processes() {
			if done, werr := p.Exited(); done {
				return false, Final(fmt.Errorf("container %s exited: %w\n%s", p.Name, werr, tail(p.Output(), 4000)))
			}
		}
		entries, err := os.ReadDir(sockets)
		if err != nil {
			return false, err
		}
		n := 0
		for _, e := range entries {
			if e.Type()&os.ModeSocket != 0 {
				n++
			}
		}
		// One socket per plugin, published by the sockets container.
		return n == len(st.Plugins), fmt.Errorf("%d of %d plugin sockets in %s", n, len(st.Plugins), sockets)
	})
	if err != nil {
		b.Stop()
		return nil, "", err
	}
	return b, sockets, nil
}
