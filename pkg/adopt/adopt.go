// Package adopt turns hand-written Config Management Plugin sidecars (a
// repo-server workload with its ConfigMaps, argo-helm's rendered chart, an
// argocd-operator ArgoCD resource, or argocd-cm's removed
// configManagementPlugins) into catalog entries, and the workload into one
// that asks the injector for them. It is pure: bytes in, a Result out; every
// piece it cannot carry over is a Finding, as data, for the caller to show.
package adopt

import (
	"slices"
	"strings"
)

// Options tune what Adopt writes where the input does not say.
type Options struct {
	// Namespace is the catalog's namespaces key for the adopted plugins;
	// empty means each object's own namespace, else "default" (as inject).
	Namespace string
	// CopyImage is defaults.copyImage of the written catalog (the image
	// with /usr/local/bin/cmp-server). A copy init container of ours in the
	// input wins.
	CopyImage string
	// ArgoCDImage is the image a sidecar runs when the input names none: a
	// legacy argocd-cm plugin (it ran inside the repo-server, with that
	// image's tools) and an operator sidecar without image (the operator
	// gives it the repo-server's). Empty: the repo-server's image when the
	// input shows it, else the plugin is not adopted.
	ArgoCDImage string
}

// defaultNamespace is the namespace of an object that names none, as
// kubectl and `cmp-injector inject` assume.
const defaultNamespace = "default"

// Severity says how much a finding costs.
type Severity string

// Severities, most severe first.
const (
	// Essential: the adopted plugin will not work as the hand-written one
	// did until the admin acts. Adopt's caller exits 1.
	Essential Severity = "essential"
	// Warning: something was changed or dropped that may matter.
	Warning Severity = "warning"
	// Info: what the admin does next, or a change that is the product's
	// intent (a private /tmp, a restricted security context).
	Info Severity = "info"
)

func (s Severity) rank() int {
	switch s {
	case Essential:
		return 0
	case Warning:
		return 1
	}
	return 2
}

// Code is a stable, machine-readable reason for a finding.
type Code string

// Finding codes.
const (
	// CodeToolsFromInitContainer: the sidecar mounts files an init container
	// wrote into a shared volume (argocd-vault-plugin's download-tools); the
	// catalog runs no per-plugin init container.
	CodeToolsFromInitContainer Code = "tools_from_init_container"
	// CodeSubPathMount: a volume mounted with subPath, which the catalog's
	// volumes cannot express.
	CodeSubPathMount Code = "subpath_mount"
	// CodeVolumeSourceUnsupported: a volume source the catalog has no form
	// for (hostPath, persistentVolumeClaim, csi, ...).
	CodeVolumeSourceUnsupported Code = "volume_source_unsupported"
	// CodeSharedVolume: a writable volume the sidecar shares with another
	// container; catalog volumes belong to one plugin.
	CodeSharedVolume Code = "shared_volume"
	// CodeMountPathReserved: a mount where the injector mounts its own.
	CodeMountPathReserved Code = "mount_path_reserved"
	// CodeVolumeNotFound: a mount of a volume the input does not define.
	CodeVolumeNotFound Code = "volume_not_found"
	// CodeSizeLimitAdded: an emptyDir without sizeLimit got one, because
	// the catalog bounds every writable volume.
	CodeSizeLimitAdded Code = "size_limit_added"
	// CodeVolumeRenamed: a volume's name was shortened or changed to fit
	// the catalog's rules.
	CodeVolumeRenamed Code = "volume_renamed"
	// CodeReadOnlyInput: a Secret, ConfigMap or projected volume mounted
	// writable is mounted read-only by the injector.
	CodeReadOnlyInput Code = "read_only_input"
	// CodeConfigFromImage: no plugin.yaml is mounted, so the image bakes
	// it; adopt cannot read images.
	CodeConfigFromImage Code = "config_from_image"
	// CodeConfigMapNotInInput: the plugin.yaml ConfigMap is not in the
	// input; the catalog refers to it by name.
	CodeConfigMapNotInInput Code = "config_map_not_in_input"
	// CodeConfigKeptInConfigMap: the plugin.yaml has problems the catalog
	// refuses inline, so the entry keeps pointing at its ConfigMap.
	CodeConfigKeptInConfigMap Code = "config_kept_in_config_map"
	// CodeConfigInvalid: a plugin.yaml adopt cannot carry in any form.
	CodeConfigInvalid Code = "config_invalid"
	// CodeConfigSourceUnsupported: plugin.yaml comes from a volume other
	// than a ConfigMap (or the injector's own annotation).
	CodeConfigSourceUnsupported Code = "config_source_unsupported"
	// CodeLockRepoDropped: spec.lockRepo, which sidecar plugins ignore.
	CodeLockRepoDropped Code = "lock_repo_dropped"
	// CodeCustomCommand: the sidecar runs something other than Argo CD's
	// plugin server; the injected one runs cmp-server serve.
	CodeCustomCommand Code = "custom_command"
	// CodeArgsDropped: flags of argocd-cmp-server.
	CodeArgsDropped Code = "args_dropped"
	// CodeEntrypointAssumed: the sidecar names no command.
	CodeEntrypointAssumed Code = "entrypoint_assumed"
	// CodeSecurityContext: the hand-written security context differs from
	// the restricted one the injector gives every sidecar.
	CodeSecurityContext Code = "security_context"
	// CodeFieldDropped: container fields the catalog has no place for
	// (ports, probes, lifecycle, workingDir, ...).
	CodeFieldDropped Code = "field_dropped"
	// CodeServiceAccountToken: the sidecar read the pod's service-account
	// token; the injector mounts an empty directory there.
	CodeServiceAccountToken Code = "service_account_token"
	// CodeImageUnknown: a sidecar without image whose image adopt cannot
	// tell (an operator sidecar, a legacy plugin).
	CodeImageUnknown Code = "image_unknown"
	// CodeLegacyPlugin: an argocd-cm plugin converted to a sidecar: it no
	// longer runs inside the repo-server.
	CodeLegacyPlugin Code = "legacy_plugin"
	// CodeLegacyEnvPrefix: a legacy command reads an Application env
	// variable by its bare name; sidecars get it as ARGOCD_ENV_<name>.
	CodeLegacyEnvPrefix Code = "legacy_env_prefix"
	// CodeNameChanged: the catalog name is not the sidecar's name minus
	// "cmp-" (invalid, too long, or taken).
	CodeNameChanged Code = "name_changed"
	// CodeInitContainerKept: an init container writes a removed volume and
	// also another one, so neither is removed.
	CodeInitContainerKept Code = "init_container_kept"
	// CodeCatalogInvalid: the written catalog does not load; the problems
	// are the loader's.
	CodeCatalogInvalid Code = "catalog_invalid"
	// CodeHelmManaged: the workload is rendered by Helm; the change belongs
	// in the chart's values.
	CodeHelmManaged Code = "helm_managed"
	// CodeOperatorManaged: the repo-server is the operator's; its ArgoCD
	// resource carries the opt-in.
	CodeOperatorManaged Code = "operator_managed"
	// CodeNamespaceLabel: the namespace must opt in too.
	CodeNamespaceLabel Code = "namespace_label"
	// CodeConfigMapUnused: a ConfigMap that only held adopted plugin.yaml
	// files, now inline in the catalog.
	CodeConfigMapUnused Code = "config_map_unused"
	// CodeNotAdopted: a sidecar left in the workload (no image, no
	// plugin.yaml adopt can carry).
	CodeNotAdopted Code = "not_adopted"
	// CodeNothingToAdopt: the input holds no CMP sidecar and no legacy plugin.
	CodeNothingToAdopt Code = "nothing_to_adopt"
	// CodeNativeSidecars: classic sidecars become native ones (init
	// containers with restartPolicy Always).
	CodeNativeSidecars Code = "native_sidecars"
	// CodeGitCredentials: a plugin.yaml with provideGitCreds; the entry gets
	// gitCredentials: true, the consent the injector needs to share the
	// repo-server's askpass socket with that sidecar.
	CodeGitCredentials Code = "git_credentials"
	// CodeSpecVersion: the plugin.yaml sets spec.version, which Argo CD 4.0
	// refuses; the finding gives the rewrite that keeps its socket name.
	CodeSpecVersion Code = "spec_version"
	// CodeLibraryEntry: the plugin runs a tool the plugin library has an
	// entry for (pkg/adopt/library.go); the note says what differs.
	CodeLibraryEntry Code = "library_entry"
	// CodeRenderCache: the sidecar's CMP_SERVER_RENDER_CACHE_* env, which
	// the catalog takes as renderCache, could not become one (a value
	// cmp-server refuses or adopt cannot read, a cache that was off), or, in
	// a hand-written sidecar, did.
	CodeRenderCache Code = "render_cache"
	// CodeInjectorEnv: a hand-written sidecar set a variable the injector
	// computes from the entry (the Secret rule), so it leaves the env.
	CodeInjectorEnv Code = "injector_env"
)

// Finding is one thing adopt could not carry over as it was, or that the
// admin must do.
type Finding struct {
	Severity Severity `json:"severity"`
	Code     Code     `json:"code"`
	// Object is the input object it is about ("Deployment argocd/argocd-repo-server").
	Object string `json:"object,omitempty"`
	// Plugin is the catalog name, when it is about one plugin.
	Plugin string `json:"plugin,omitempty"`
	// Message says what was not carried over and why.
	Message string `json:"message"`
	// Action says what the admin does about it.
	Action string `json:"action,omitempty"`
}

// Adopted is one plugin written to the catalog.
type Adopted struct {
	// Name is the catalog name.
	Name string `json:"name"`
	// Object is where it came from; Container the sidecar's name, or the
	// legacy plugin's name in argocd-cm.
	Object    string `json:"object"`
	Container string `json:"container"`
}

// Result is what adopt produced.
type Result struct {
	// Catalog is catalog.yaml; Workload is workload.yaml (every object adopt
	// changed, in input order).
	Catalog  []byte
	Workload []byte
	Plugins  []Adopted
	// Removed names, per object, what was taken out of it.
	Removed  []Removal
	Findings []Finding
}

// Removal is what adopt took out of one object.
type Removal struct {
	Object         string   `json:"object"`
	Containers     []string `json:"containers,omitempty"`
	InitContainers []string `json:"initContainers,omitempty"`
	Volumes        []string `json:"volumes,omitempty"`
	Keys           []string `json:"keys,omitempty"`
}

// Lost reports whether anything essential was not carried over.
func (r *Result) Lost() bool {
	return slices.ContainsFunc(r.Findings, func(f Finding) bool { return f.Severity == Essential })
}

// findings collects findings in the order they are found.
type findings []Finding

func (fs *findings) add(sev Severity, code Code, object, plugin, msg, action string) {
	*fs = append(*fs, Finding{Severity: sev, Code: code, Object: object, Plugin: plugin, Message: msg, Action: action})
}

// reported says whether a finding of code already says what text ends with.
func (fs *findings) reported(code Code, text string) bool {
	return slices.ContainsFunc(*fs, func(f Finding) bool { return f.Code == code && strings.HasSuffix(text, f.Message) })
}
