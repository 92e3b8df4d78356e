// Package catalog is the admin-owned list of plugins the injector may add to
// repo-server pods, and of the namespaces allowed to use each of them.
package catalog

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
	"github.com/cmp-injector/cmp-injector/pkg/tenancy"
)

// APIVersion and Kind identify a catalog file (adopt writes them too).
const (
	APIVersion = "cmp-injector.io/v1alpha1"
	Kind       = "PluginCatalog"
	// AllNamespaces is the namespaces key whose plugins every namespace may use.
	AllNamespaces = "*"
)

// catalogFile is the catalog document exactly as written by an admin or rendered by the chart.
type catalogFile struct {
	APIVersion string              `json:"apiVersion"`
	Kind       string              `json:"kind"`
	Revision   string              `json:"revision,omitempty"`
	Defaults   Defaults            `json:"defaults,omitempty"`
	Plugins    map[string]*Plugin  `json:"plugins"`
	Namespaces map[string][]string `json:"namespaces,omitempty"`
}

// Defaults apply to every plugin unless the plugin overrides them.
type Defaults struct {
	// NativeSidecars puts sidecars in initContainers with restartPolicy Always
	// (true, the default when unset), appends them to containers (false), or
	// asks the API server which of the two it accepts (auto).
	NativeSidecars NativeSidecarsSetting `json:"nativeSidecars,omitempty"`
	// CopyImage is the image of the init container that copies the plugin server.
	CopyImage           string            `json:"copyImage,omitempty"`
	CopyImagePullPolicy corev1.PullPolicy `json:"copyImagePullPolicy,omitempty"`
	// RunAsUser is the sidecar UID when neither the repo-server container nor the
	// pod sets one. Nil means 999.
	RunAsUser *int64 `json:"runAsUser,omitempty"`
	// RunAsUserPolicy is runAsUserFixed (empty means it) or
	// runAsUserAssigned: with Assigned, a sidecar whose repo-server and pod
	// set no UID gets none either, and the platform assigns one.
	RunAsUserPolicy string                       `json:"runAsUserPolicy,omitempty"`
	Resources       *corev1.ResourceRequirements `json:"resources,omitempty"`
	// RepoServer tunes how the repo-server sends repositories to plugins.
	RepoServer *RepoServer `json:"repoServer,omitempty"`
	// TmpSizeLimit bounds every sidecar's private /tmp (an emptyDir);
	// nil leaves it unbounded, as Kubernetes does.
	TmpSizeLimit *resource.Quantity `json:"tmpSizeLimit,omitempty"`
	// TmpMedium is where every sidecar's /tmp lives: Disk (empty means it,
	// the node's disk) or Memory (a tmpfs whose files count against the
	// sidecar's memory limit; needs a tmpSizeLimit). tmp.go.
	TmpMedium string `json:"tmpMedium,omitempty"`
	// RepoServerContainer says how the injector recognises Argo CD's
	// repo-server container. Nil means the defaults below.
	RepoServerContainer *RepoServerContainer `json:"repoServerContainer,omitempty"`
}

// RepoServerContainer recognises the repo-server container of a pod: a
// container with one of Names, or whose program (its command's executable,
// seen through entrypoint wrappers such as tini or sh -c) is one of Programs.
// A labelled pod without one is not a repo-server and is skipped: one label in
// argo-helm's global.podLabels reaches every Argo CD workload, and neither
// argocd-server nor redis must get sidecars or be denied.
type RepoServerContainer struct {
	// Names are container names. Nil means defaultRepoServerContainerNames.
	Names *[]string `json:"names,omitempty"`
	// Programs are executable base names. Nil means defaultRepoServerPrograms.
	Programs *[]string `json:"programs,omitempty"`
}

// RunAsUser policies. Fixed falls back to runAsUser (999, the UID of Argo
// CD's image); Assigned falls back to nothing: OpenShift's restricted-v2 SCC
// refuses a fixed UID outside the namespace's range, which differs per
// namespace, and assigns one itself to every container that sets none.
const (
	runAsUserFixed    = "Fixed"
	runAsUserAssigned = "Assigned"
)

// resolved is rc with its defaults applied (rc may be nil: all defaults).
func (rc *RepoServerContainer) resolved() (names, programs []string) {
	names, programs = defaultRepoServerContainerNames, defaultRepoServerPrograms
	if rc != nil && rc.Names != nil {
		names = *rc.Names
	}
	if rc != nil && rc.Programs != nil {
		programs = *rc.Programs
	}
	return names, programs
}

// defaultRepoServerContainerNames are the names the install paths give the
// repo-server container: Argo CD's manifests and the operator use
// argocd-repo-server, argo-helm's chart repo-server (repoServer.name).
var defaultRepoServerContainerNames = []string{keys.RepoServerContainer, "repo-server"}

// defaultRepoServerPrograms is the repo-server's executable in Argo CD's image,
// whatever the container is called.
var defaultRepoServerPrograms = []string{"argocd-repo-server"}

// RepoServer settings become env vars of the repo-server container of every
// injected pod, each only when the container does not set that variable itself
// (and has no envFrom, which might): an explicit value always wins.
type RepoServer struct {
	// CMPChunkSize is ARGOCD_CMP_CHUNK_SIZE, the bytes per stream message. Nil
	// means DefaultCMPChunkSize; 0 leaves the repo-server's own default (1024).
	CMPChunkSize *int `json:"cmpChunkSize,omitempty"`
	// PluginTarExclusions is ARGOCD_REPO_SERVER_PLUGIN_TAR_EXCLUSIONS, globs
	// (filepath.Match on the path relative to the repository root) left out of
	// every plugin tarball. Nil means DefaultPluginTarExclusions; [] sends
	// everything, which plugins that run git need.
	PluginTarExclusions *[]string `json:"pluginTarExclusions,omitempty"`
	// PluginUseManifestGeneratePaths is
	// ARGOCD_REPO_SERVER_PLUGIN_USE_MANIFEST_GENERATE_PATHS (Argo CD v2.14+):
	// for generation the repo-server packs only the common root of an
	// Application's argocd.argoproj.io/manifest-generate-paths instead of the
	// whole repository. Off by default: it changes what a plugin can read, so
	// it is safe only where every Application's annotation covers every path
	// its render reads (docs/catalog.md, Repo-server tuning).
	PluginUseManifestGeneratePaths bool `json:"pluginUseManifestGeneratePaths,omitempty"`
}

// DefaultCMPChunkSize replaces the repo-server's 1 KiB messages (one gRPC
// message per KiB of the compressed repository) with messages just under
// 32 KiB. gRPC marshals each message into a pooled buffer of the next size up
// among 256 B, 4, 16 and 32 KiB and 1 MiB: a chunk of 32,000 bytes (8 bytes
// of framing) takes a 32 KiB buffer, where the 64 and 256 KiB chunks tried
// before each took 1 MiB, and through the whole Argo CD the repo-server's peak
// under 20 concurrent streams was about 80 MiB higher for it
// (docs/performance.md, "Through the whole Argo CD").
const DefaultCMPChunkSize = 32000

// maxCMPChunkSize keeps a chunk far below the gRPC message limit both sides
// use (100 MiB) and bounds what each side buffers per message.
const maxCMPChunkSize = 16 << 20

// DefaultPluginTarExclusions leaves .git out of plugin tarballs: in a clone it
// is often as large as the tree, compresses poorly, and few plugins read it.
var DefaultPluginTarExclusions = []string{".git"}

// Plugin is one catalog entry; its map key is the catalog name.
type Plugin struct {
	Image           string            `json:"image"`
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// AllowedImages are path.Match patterns a pod's image override must match.
	AllowedImages []string        `json:"allowedImages,omitempty"`
	Env           []corev1.EnvVar `json:"env,omitempty"`
	// EnvFrom are Secrets and ConfigMaps (by name, in the pod's namespace)
	// whose keys become the sidecar's env; the injector never reads them.
	EnvFrom   []corev1.EnvFromSource       `json:"envFrom,omitempty"`
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// TmpSizeLimit replaces defaults.tmpSizeLimit for this plugin's /tmp.
	TmpSizeLimit *resource.Quantity `json:"tmpSizeLimit,omitempty"`
	// TmpMedium replaces defaults.tmpMedium for this plugin's /tmp (Disk
	// or Memory; empty: the default's).
	TmpMedium string `json:"tmpMedium,omitempty"`
	// Volumes are mounted in this plugin's sidecar only.
	Volumes []Volume `json:"volumes,omitempty"`
	// Home, when set, gives the sidecar a writable HOME (an emptyDir).
	Home *Home `json:"home,omitempty"`
	// GitCredentials is the admin's consent that this plugin receives the
	// repo-server's git credentials (provideGitCreds): the credentials of
	// every repository the repo-server clones for an Application that uses
	// it. Only then does its sidecar share the repo-server's askpass socket.
	GitCredentials bool `json:"gitCredentials,omitempty"`
	// RenderCache, when set, lets the sidecar answer a repeated
	// GenerateManifest from memory (rendercache.go).
	RenderCache *RenderCache `json:"renderCache,omitempty"`
	// ServerPath is the admin's word that the plugin's image (and every
	// image its allowedImages allow) carries cmp-server at this absolute
	// path. When every plugin a pod asks for has one, the sidecars run it
	// from their images and the pod gets no copy init container
	// (serverpath.go); empty: the server is copied from defaults.copyImage.
	ServerPath string       `json:"serverPath,omitempty"`
	Config     ConfigSource `json:"config"`
	// Rules (allowedProjects, allowedSourceRepos) limit which Argo CD
	// projects and repositories may use the plugin; absent: all (tenancy.go).
	tenancy.Rules
}

// Volume is one volume of a plugin's sidecar: where it is mounted and
// exactly one source. Secret, ConfigMap and Projected are inputs and always
// mounted read-only; only an EmptyDir follows ReadOnly.
type Volume struct {
	// Name is unique within the plugin; the pod volume is
	// keys.PluginVolumeName(plugin, Name).
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
	ReadOnly  bool   `json:"readOnly,omitempty"`

	Secret    *corev1.SecretVolumeSource    `json:"secret,omitempty"`
	ConfigMap *corev1.ConfigMapVolumeSource `json:"configMap,omitempty"`
	// Projected may combine secret, configMap and serviceAccountToken
	// sources; a token must name its audience.
	Projected *corev1.ProjectedVolumeSource `json:"projected,omitempty"`
	// EmptyDir must carry a sizeLimit.
	EmptyDir *corev1.EmptyDirVolumeSource `json:"emptyDir,omitempty"`
}

// IsInput reports whether v carries data into the sidecar (anything but an
// emptyDir): such a volume is mounted read-only whatever ReadOnly says.
func (v *Volume) IsInput() bool { return v.EmptyDir == nil }

// Home is a writable HOME for tools that keep caches and settings there
// (helm, kubectl, vals), bounded so a runaway cache evicts the pod instead of
// filling the node's disk.
type Home struct {
	SizeLimit *resource.Quantity `json:"sizeLimit"`
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
	Names []string
	// Warnings are what is valid but likely a mistake, e.g. a default image
	// its own allowedImages would refuse; whoever loads the catalog shows them.
	Warnings   []string
	namespaces map[string][]string
}

// ResolvedDefaults are Defaults with every default applied.
type ResolvedDefaults struct {
	// NativeSidecars is the sidecar kind injected: defaults.nativeSidecars,
	// or what auto resolved to.
	NativeSidecars bool
	// NativeSidecarsAuto says the catalog set auto; NativeSidecarsReason then
	// says how it was resolved (what the API server said, or that none was
	// asked).
	NativeSidecarsAuto   bool
	NativeSidecarsReason string
	CopyImage            string
	CopyImagePullPolicy  corev1.PullPolicy
	// RunAsUser is the fallback sidecar UID; 0 under runAsUserAssigned:
	// set none.
	RunAsUser int64
	Resources corev1.ResourceRequirements
	// TmpSizeLimit is defaults.tmpSizeLimit; nil when unset.
	TmpSizeLimit *resource.Quantity
	// TmpMedium is defaults.tmpMedium as an emptyDir medium: "" (disk) or
	// Memory.
	TmpMedium corev1.StorageMedium
	// RepoServerEnv are the RepoServer settings as env vars, in a fixed order.
	RepoServerEnv []corev1.EnvVar
	// RepoServerNames and RepoServerPrograms recognise the repo-server
	// container (RepoServerContainer with its defaults applied).
	RepoServerNames    []string
	RepoServerPrograms []string
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
