// Package keys holds every label, annotation and well-known path that the injector,
// the chart and the plugin server agree on. Users and the chart depend on these
// names, so they live in one place and change only with a deprecation.
package keys

const (
	// NamespaceEnabledLabel opts a namespace in; it is the webhook's namespaceSelector.
	NamespaceEnabledLabel = "cmp-injector.io/enabled"
	// InjectLabel opts a pod in; it is the webhook's objectSelector.
	InjectLabel = "cmp-injector.io/inject"
	// PluginsAnnotation lists the catalog plugins a pod asks for, comma separated.
	PluginsAnnotation = "cmp-injector.io/plugins"
	// StatusAnnotation is written by the injector: JSON of what it injected.
	StatusAnnotation = "cmp-injector.io/status"

	// WebhookName is the webhook's name in the MutatingWebhookConfiguration;
	// the API server names it in every denial, doctor finds the webhook by it.
	WebhookName = "inject.cmp-injector.io"

	// PolicyRevisionAnnotation is on each object of policy mode (pkg/policy):
	// the catalog revision it was rendered from, which doctor compares with
	// the catalog's.
	PolicyRevisionAnnotation = "cmp-injector.io/catalog-revision"

	// EnabledValue is the only value of the two opt-in labels that means yes.
	EnabledValue = "true"
)

// Paths and names Argo CD's repo-server and its sidecars agree on.
const (
	// VarFilesVolume carries the plugin server binary from the copy init container
	// into every sidecar. A pod whose every plugin's image carries the server
	// (the catalog's serverPath) has no copy, and gets no var-files of ours.
	VarFilesVolume = "var-files"
	// VarFilesMountPath is where var-files is mounted in the init and sidecar containers.
	VarFilesMountPath = "/var/run/argocd"
	// PluginServerPath is where the copy init container places the plugin
	// server, which the sidecars then run. Plugin commands name it too: the
	// server runs itself for a command whose argv[0] is this path, so they
	// also work in a sidecar that runs its image's server (serverPath).
	PluginServerPath = "/var/run/argocd/cmp-server"
	// PluginsVolume is the emptyDir shared by the repo-server and the sidecars for sockets.
	PluginsVolume = "plugins"
	// PluginSocketDir is the default socket directory (ARGOCD_PLUGINSOCKFILEPATH).
	PluginSocketDir = "/home/argocd/cmp-server/plugins"
	// PluginConfigDir is where a sidecar's plugin server reads plugin.yaml.
	PluginConfigDir = "/home/argocd/cmp-server/config"
	// PluginConfigFile is the file name inside PluginConfigDir.
	PluginConfigFile = "plugin.yaml"
	// DefaultArgoCDUID is the UID the upstream repo-server image runs as; sidecars must
	// match it because the socket is only writable by its owner.
	DefaultArgoCDUID int64 = 999
)

// Environment variables shared with Argo CD.
const (
	EnvPluginSockFilePath = "ARGOCD_PLUGINSOCKFILEPATH"
	EnvCMPWorkDir         = "ARGOCD_CMP_WORKDIR"
	EnvGRPCMaxSizeMB      = "ARGOCD_GRPC_MAX_SIZE_MB"
	EnvAppParameters      = "ARGOCD_APP_PARAMETERS"
	// EnvCMPChunkSize is the repo-server's chunk size for plugin tarballs
	// (bytes per stream message; Argo CD's default 1024).
	EnvCMPChunkSize = "ARGOCD_CMP_CHUNK_SIZE"
	// EnvPluginTarExclusions lists ;-separated globs the repo-server leaves
	// out of plugin tarballs (its --plugin-tar-exclude flag's default).
	EnvPluginTarExclusions = "ARGOCD_REPO_SERVER_PLUGIN_TAR_EXCLUSIONS"
	// EnvPluginUseManifestGeneratePaths: pack only an Application's
	// manifest-generate-paths for a plugin's generation (Argo CD v2.14+).
	EnvPluginUseManifestGeneratePaths = "ARGOCD_REPO_SERVER_PLUGIN_USE_MANIFEST_GENERATE_PATHS"
)

// The build env the repo-server sends with every request (Argo CD's
// GetManifests), which plugin commands read.
const (
	EnvAppName                 = "ARGOCD_APP_NAME"
	EnvAppNamespace            = "ARGOCD_APP_NAMESPACE"
	EnvAppProjectName          = "ARGOCD_APP_PROJECT_NAME"
	EnvAppRevision             = "ARGOCD_APP_REVISION"
	EnvAppRevisionShort        = "ARGOCD_APP_REVISION_SHORT"
	EnvAppRevisionShort8       = "ARGOCD_APP_REVISION_SHORT_8"
	EnvAppSourceRepoURL        = "ARGOCD_APP_SOURCE_REPO_URL"
	EnvAppSourcePath           = "ARGOCD_APP_SOURCE_PATH"
	EnvAppSourceTargetRevision = "ARGOCD_APP_SOURCE_TARGET_REVISION"
	EnvKubeVersion             = "KUBE_VERSION"
	EnvKubeAPIVersions         = "KUBE_API_VERSIONS"
)

// Keys owned by the injector's per-pod overrides and projections.
const (
	// ImageAnnotationPrefix + <plugin> overrides a plugin's image; the value must
	// match one of the plugin's allowedImages patterns in the catalog.
	ImageAnnotationPrefix = "image.cmp-injector.io/"
	// ConfigAnnotationPrefix + <plugin> carries an inline plugin.yaml, written by the
	// injector and projected into the sidecar by a downwardAPI volume.
	ConfigAnnotationPrefix = "config.cmp-injector.io/"
	// RepoServerContainer is the repo-server container's name in Argo CD's
	// manifests and the operator's Deployment (the catalog's first default
	// for recognising one), and the name the reconciler gives what it adds
	// to that container.
	RepoServerContainer = "argocd-repo-server"
	// CopyInitContainer is the init container that copies the plugin server
	// into var-files; left out when every plugin's image carries the server.
	CopyInitContainer = "cmp-injector-copy"
	// SidecarPrefix + <plugin> names each plugin's sidecar container (and
	// starts its volumes' names: see SidecarName).
	SidecarPrefix = "cmp-"
	// CopyServerBinary is where the plugin server binary lives inside the copy
	// image, and inside the plugin library's images (their catalog serverPath).
	CopyServerBinary = "/usr/local/bin/cmp-server"
	// SocketsContainer publishes each plugin's socket from its private
	// directory into the repo-server's socket directory (cmp-server publish);
	// it runs the copy image. No sidecar mounts that directory itself.
	SocketsContainer = "cmp-injector-sockets"
	// RolloutAnnotation is written by the reconciler (rollout: auto) on a
	// Deployment it restarted because its pods were stale (its own metadata,
	// not the pod template): the catalog revision they were restarted for.
	RolloutAnnotation = "cmp-injector.io/rollout-revision"
	// RestartedAtAnnotation is what `kubectl rollout restart` writes into a
	// pod template to restart a Deployment; the reconciler restarts the same
	// way, because operators that own the Deployment (argocd-operator keeps
	// only *kubernetes.io*, *k8s.io* and *openshift.io* template annotations)
	// keep it, where an annotation of ours would be stripped and the rollout
	// undone on the next resync.
	RestartedAtAnnotation = "kubectl.kubernetes.io/restartedAt"
	// ReconcilerAnnotation is written by the reconciler with every patch of a
	// pod: the release whose reconciler wrote it (<lease namespace>/<lease
	// name>), so that two releases with different catalogs notice each other
	// and back off instead of rewriting each other's patches.
	ReconcilerAnnotation = "cmp-injector.io/reconciled-by"
)

// Names the Kubernetes Deployment controller writes, which the reconciler
// reads to prove that a Deployment owns a pod.
const (
	// DeploymentRevisionAnnotation is the rollout revision, on a Deployment
	// and on each of its ReplicaSets; the newest ReplicaSet carries the
	// Deployment's.
	DeploymentRevisionAnnotation = "deployment.kubernetes.io/revision"
)

// Git credentials for plugins (provideGitCreds): Argo CD's repo-server serves
// them over its askpass socket to whoever holds the request's nonce, and git
// in the plugin asks for them through GIT_ASKPASS.
const (
	// AskPassVolume is the emptyDir the injector shares between the
	// repo-server and the sidecars of plugins whose catalog entry consents to
	// git credentials (gitCredentials: true), and no other sidecar.
	AskPassVolume = "cmp-askpass"
	// AskPassDir is where AskPassVolume is mounted, at the same path in every
	// container that mounts it: the repo-server sends the socket's path in the
	// request env, and the sidecar dials that path.
	AskPassDir = "/home/argocd/cmp-server/askpass"
	// AskPassSocket is the repo-server's askpass socket in AskPassDir.
	AskPassSocket = AskPassDir + "/reposerver-ask-pass.sock"
	// EnvAskPassSock moves Argo CD's askpass socket (default
	// /tmp/reposerver-ask-pass.sock, in the repo-server's private /tmp).
	EnvAskPassSock = "ARGOCD_ASK_PASS_SOCK"
	// EnvAskPassNonce names the credentials of one request.
	EnvAskPassNonce = "ARGOCD_GIT_ASKPASS_NONCE"
	// EnvGitAskPass is git's askpass program; the repo-server sends
	// GitAskPassArgoCD, Argo CD's multi-call binary, which a plugin image
	// rarely has: the plugin server runs itself in its place.
	EnvGitAskPass    = "GIT_ASKPASS"
	GitAskPassArgoCD = "argocd"
	// EnvBinaryName selects the role of Argo CD's multi-call binary;
	// BinaryNameGitAskPass is its askpass client, the role the plugin server
	// takes when git runs it.
	EnvBinaryName        = "ARGOCD_BINARY_NAME"
	BinaryNameGitAskPass = "argocd-git-ask-pass"
)

// More environment variables shared with Argo CD's plugin server.
const (
	EnvGRPCKeepAliveMin = "ARGOCD_GRPC_KEEP_ALIVE_MIN"
	// EnvExecTimeout and EnvExecFatalTimeout default --exec-timeout and
	// --kill-grace: Argo CD's documentation promises that a CMP sidecar's
	// ARGOCD_EXEC_TIMEOUT bounds each command, though its server never
	// reads it (only its util/exec does, for git and its own tools).
	EnvExecTimeout      = "ARGOCD_EXEC_TIMEOUT"
	EnvExecFatalTimeout = "ARGOCD_EXEC_FATAL_TIMEOUT"
	// EnvCMPServerLogLevel and EnvCMPServerLogFormat default --loglevel and --logformat.
	EnvCMPServerLogLevel  = "ARGOCD_CMP_SERVER_LOGLEVEL"
	EnvCMPServerLogFormat = "ARGOCD_CMP_SERVER_LOGFORMAT"
	// The OTLP settings default --otlp-address, --otlp-insecure,
	// --otlp-headers, --otlp-attrs and --otlp-sample-ratio, as argocd-cmp-server's.
	EnvCMPServerOTLPAddress     = "ARGOCD_CMP_SERVER_OTLP_ADDRESS"
	EnvCMPServerOTLPInsecure    = "ARGOCD_CMP_SERVER_OTLP_INSECURE"
	EnvCMPServerOTLPHeaders     = "ARGOCD_CMP_SERVER_OTLP_HEADERS"
	EnvCMPServerOTLPAttrs       = "ARGOCD_CMP_SERVER_OTLP_ATTRS"
	EnvCMPServerOTLPSampleRatio = "ARGOCD_CMP_SERVER_OTLP_SAMPLE_RATIO"
	// The OpenTelemetry exporter's own TLS files, read as Argo CD's tracer
	// reads them: the signal's name wins over the generic one.
	EnvOTLPTracesCertificate       = "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE"
	EnvOTLPCertificate             = "OTEL_EXPORTER_OTLP_CERTIFICATE"
	EnvOTLPTracesClientCertificate = "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE"
	EnvOTLPClientCertificate       = "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE"
	EnvOTLPTracesClientKey         = "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY"
	EnvOTLPClientKey               = "OTEL_EXPORTER_OTLP_CLIENT_KEY"
	// EnvPluginEnvPrefix starts each spec.source.plugin.env entry in a plugin's env.
	EnvPluginEnvPrefix = "ARGOCD_ENV_"
	// EnvLogLevel and EnvLogFormat carry the plugin server's own log level (logrus
	// names: trace … panic, "warning" not "warn") and format ("json" or "text") into
	// every plugin command's env; argocd-cmp-server sets them in its own env.
	EnvLogLevel  = "ARGOCD_LOG_LEVEL"
	EnvLogFormat = "ARGOCD_LOG_FORMAT"
)

// EnvCommandID is set by cmp-server (not Argo CD) in the env of every plugin
// command, to a random value per command. Processes inherit it, so when the
// command ends the server finds what is left of it by this variable, even a
// process that left the command's process group (setsid) and lost its parent.
const EnvCommandID = "CMP_SERVER_COMMAND_ID"

// EnvSecretEnv is set by the injector (not Argo CD) on a sidecar whose catalog
// entry takes env from Secrets: which of the sidecar's variables hold Secret
// values, by name and never by value. cmp-server replaces those values with
// "[redacted NAME]" in its logs and errors. The value is a comma-separated
// list of items: a name (env valueFrom.secretKeyRef), a prefix ending in "*"
// (an envFrom secretRef: its keys are unknown until the kubelet reads the
// Secret; "*" alone for no prefix), or "!" and a name that no pattern covers
// (a variable the catalog sets itself, which wins over envFrom).
const EnvSecretEnv = "CMP_SERVER_SECRET_ENV"

// The render cache's settings (cmp-server's --render-cache-* flags), which
// the injector sets on a sidecar from its catalog entry's renderCache.
const (
	EnvRenderCacheSize                = "CMP_SERVER_RENDER_CACHE_SIZE"
	EnvRenderCacheTTL                 = "CMP_SERVER_RENDER_CACHE_TTL"
	EnvRenderCacheRevisionIndependent = "CMP_SERVER_RENDER_CACHE_REVISION_INDEPENDENT"
	EnvRenderCacheAllowSecrets        = "CMP_SERVER_RENDER_CACHE_ALLOW_SECRETS"
)

// Bounds on the plugins annotation (PluginsAnnotation). The webhook refuses a
// longer list; the reconciler, which caches pods, keeps a longer value as
// "oversized" rather than its bytes. Both must use one figure, or a pod could
// be judged one way on admission and another in the cache.
const (
	// MaxPluginsListed is more plugins than any catalog offers a pod.
	MaxPluginsListed = 64
	// MaxPluginsAnnotationBytes fits MaxPluginsListed names of the longest
	// allowed length (a DNS label, 63 bytes) with their separators.
	MaxPluginsAnnotationBytes = MaxPluginsListed * (maxDNSLabel + 1)
)

// Names derived from a plugin's name: its sidecar and the sidecar's two
// volumes. Each must be a DNS-1123 label (at most 63 characters), which is
// what bounds the length of a plugin's name in the catalog.
const (
	// tmpVolumeSuffix ends the name of a sidecar's private /tmp volume.
	tmpVolumeSuffix = "-tmp"
	// configVolumeSuffix ends the name of the volume carrying a sidecar's plugin.yaml.
	configVolumeSuffix = "-config"
	// MaxPluginNameLen is the longest plugin name whose derived names all
	// fit in a DNS-1123 label.
	MaxPluginNameLen = maxDNSLabel - len(SidecarPrefix) - max(len(tmpVolumeSuffix), len(configVolumeSuffix), len(homeVolumeSuffix))

	maxDNSLabel = 63
)

// SidecarName is the name of plugin's sidecar container.
func SidecarName(plugin string) string { return SidecarPrefix + plugin }

// TmpVolumeName is the name of plugin's private /tmp volume.
func TmpVolumeName(plugin string) string { return SidecarPrefix + plugin + tmpVolumeSuffix }

// ConfigVolumeName is the name of the volume carrying plugin's plugin.yaml.
func ConfigVolumeName(plugin string) string { return SidecarPrefix + plugin + configVolumeSuffix }

// DerivedNames are every name derived from plugin, for checks that must
// cover them all.
func DerivedNames(plugin string) []string {
	return []string{SidecarName(plugin), TmpVolumeName(plugin), ConfigVolumeName(plugin), HomeVolumeName(plugin), ShmVolumeName(plugin)}
}

// homeVolumeSuffix ends the name of a sidecar's writable HOME volume;
// pluginVolumeInfix joins a plugin's name and one of its catalog volumes'.
const (
	homeVolumeSuffix  = "-home"
	pluginVolumeInfix = "-v-"
)

// HomeVolumeName is the name of plugin's writable HOME (the catalog's home).
func HomeVolumeName(plugin string) string { return SidecarPrefix + plugin + homeVolumeSuffix }

// PluginVolumeName is the pod volume carrying the catalog volume vol of
// plugin: prefixed and joined so that it names neither a volume of the pod's
// own (those never start with the sidecar prefix unless they clash, which the
// injector refuses) nor the tmp, config or home volume of any plugin. It must
// be a DNS-1123 label, which bounds len(plugin)+len(vol); the catalog checks.
func PluginVolumeName(plugin, vol string) string {
	return SidecarPrefix + plugin + pluginVolumeInfix + vol
}

// Paths the injector gives a sidecar besides its /tmp and config.
const (
	// PluginHomeDir is a sidecar's HOME when the catalog gives it a
	// writable one; XDG_CACHE_HOME, XDG_CONFIG_HOME and XDG_DATA_HOME point
	// inside it.
	PluginHomeDir = "/home/cmp-plugin"
	// ServiceAccountTokenDir is where Kubernetes mounts the pod's default
	// service-account token into every container that mounts nothing there.
	ServiceAccountTokenDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	// NoTokenVolume is the empty volume the injector mounts at
	// ServiceAccountTokenDir in each container it adds, so that the
	// repo-server's default token never reaches a plugin.
	NoTokenVolume = "cmp-injector-no-token"
	// EnvHome and the XDG variables point a plugin's tools at its HOME.
	EnvHome          = "HOME"
	EnvXDGCacheHome  = "XDG_CACHE_HOME"
	EnvXDGConfigHome = "XDG_CONFIG_HOME"
	EnvXDGDataHome   = "XDG_DATA_HOME"
)

// Each sidecar mounts only its own directory of the plugins volume at
// PluginSocketDir (a subPath), so a plugin's commands cannot delete, replace
// or dial another plugin's socket; the sockets container, which alone mounts
// the whole volume beside the repo-server, hard-links each plugin's socket
// into the volume's root, where the repo-server looks.
const (
	// PrivateSocketsDir is the directory of the plugins volume holding the
	// sockets container's state: each plugin's directory under PrivatePlugins
	// and the socket name each image-configured plugin claimed under
	// PrivateClaims. A directory in the socket dir is ignored by Argo CD,
	// which dials only sockets. Short: a socket path is at most 107 bytes,
	// and a test's mapped volume path is long.
	PrivateSocketsDir = ".cmp"
	PrivatePlugins    = PrivateSocketsDir + "/plugins"
	PrivateClaims     = PrivateSocketsDir + "/claims"
	// SocketsConfigDir + "/" + <plugin> is where the sockets container reads a
	// plugin's plugin.yaml (the sidecar's own config volume, read-only), to
	// publish the socket the plugin's name gives.
	SocketsConfigDir = "/var/run/cmp-injector/config"
	// shmVolumeSuffix ends the name of a sidecar's private /dev/shm: a pod's
	// containers share one otherwise, and Argo CD's repo-server writes its
	// SSH private keys there while it clones.
	shmVolumeSuffix = "-shm"
	// ShmDir is the shared-memory directory every container sees.
	ShmDir = "/dev/shm"
)

// PrivateSocketSubPath is the subPath of the plugins volume that plugin's
// sidecar mounts at PluginSocketDir.
func PrivateSocketSubPath(plugin string) string { return PrivatePlugins + "/" + plugin }

// ShmVolumeName is the name of plugin's private /dev/shm volume.
func ShmVolumeName(plugin string) string { return SidecarPrefix + plugin + shmVolumeSuffix }

// SocketFile is the socket file a plugin server creates in PluginSocketDir,
// <name>[-<version>].sock (Argo CD's plugin.yaml metadata.name and
// spec.version); the repo-server dials it by the Application's plugin name.
func SocketFile(name, version string) string {
	if version != "" {
		return name + "-" + version + ".sock"
	}
	return name + ".sock"
}
