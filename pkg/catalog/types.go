// Package catalog is the admin-owned list of plugins the injector may add to
// repo-server pods, and of the namespaces allowed to use each of them.
package catalog

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
)

// APIVersion and Kind identify a catalog file.
const (
	APIVersion = "cmp-injector.io/v1alpha1"
	Kind       = "PluginCatalog"
	// AllNamespaces is the namespaces key whose plugins every namespace may use.
	AllNamespaces = "*"
)

// File is the catalog document exactly as written by an admin or rendered by the chart.
type File struct {
	APIVersion string              `json:"apiVersion"`
	Kind       string              `json:"kind"`
	Revision   string              `json:"revision,omitempty"`
	Defaults   Defaults            `json:"defaults,omitempty"`
	Plugins    map[string]*Plugin  `json:"plugins"`
	Namespaces map[string][]string `json:"namespaces,omitempty"`
}

// Defaults apply to every plugin unless the plugin overrides them.
type Defaults struct {
	// NativeSidecars puts sidecars in initContainers with restartPolicy Always.
	// Nil means true.
	NativeSidecars *bool `json:"nativeSidecars,omitempty"`
	// CopyImage is the image of the init container that copies the plugin server.
	CopyImage           string            `json:"copyImage,omitempty"`
	CopyImagePullPolicy corev1.PullPolicy `json:"copyImagePullPolicy,omitempty"`
	// RunAsUser is the sidecar UID when neither the repo-server container nor the
	// pod sets one. Nil means 999.
	RunAsUser *int64                       `json:"runAsUser,omitempty"`
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// Plugin is one catalog entry; its map key is the catalog name.
type Plugin struct {
	Image           string            `json:"image"`
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// AllowedImages are path.Match patterns a pod's image override must match.
	AllowedImages []string                     `json:"allowedImages,omitempty"`
	Env           []corev1.EnvVar              `json:"env,omitempty"`
	Resources     *corev1.ResourceRequirements `json:"resources,omitempty"`
	Config        ConfigSource                 `json:"config"`
}

// ConfigSource says where the sidecar finds plugin.yaml; exactly one field is set.
type ConfigSource struct {
	// Inline is a whole plugin.yaml, projected from a pod annotation.
	Inline json.RawMessage `json:"inline,omitempty"`
	// ConfigMap is mounted with subPath in the sidecar.
	ConfigMap *ConfigMapRef `json:"configMap,omitempty"`
	// FromImage means the image bakes plugin.yaml into its config directory.
	FromImage bool `json:"fromImage,omitempty"`
}

// ConfigMapRef names a ConfigMap in the pod's namespace and the key holding plugin.yaml.
type ConfigMapRef struct {
	Name string `json:"name"`
	// Key defaults to plugin.yaml.
	Key string `json:"key,omitempty"`
}

// Catalog is a validated catalog, ready for injection. It is immutable once
// built and shared between goroutines.
type Catalog struct {
	Revision string
	Defaults ResolvedDefaults
	Plugins  map[string]*Entry
	// Names lists the catalog names in sorted order, for messages.
	Names      []string
	namespaces map[string][]string
}

// ResolvedDefaults are Defaults with every default applied.
type ResolvedDefaults struct {
	NativeSidecars      bool
	CopyImage           string
	CopyImagePullPolicy corev1.PullPolicy
	RunAsUser           int64
	Resources           corev1.ResourceRequirements
}

// Entry is a validated plugin with its parsed inline configuration.
type Entry struct {
	Name string
	Plugin
	// InlineYAML is the inline config rendered as YAML, the exact bytes the
	// sidecar reads; empty unless Config.Inline is set.
	InlineYAML string
	// Parsed is the inline config; nil for ConfigMap and image-baked configs.
	Parsed *pluginconfig.Plugin
	// Socket is the socket file name the sidecar will create, when known.
	Socket string
}
