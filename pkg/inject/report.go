// Package inject decides whether and how a repo-server pod gets its plugin
// sidecars. It is pure (no I/O) so the webhook and the offline CLI share it and
// produce the same result for the same pod and catalog.
package inject

import (
	"encoding/json"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// Decision is the outcome of one injection attempt.
type Decision string

// Decisions.
const (
	Injected Decision = "injected"
	Skipped  Decision = "skipped"
	Denied   Decision = "denied"
)

// Reason is a stable, machine-readable code: it is a metric label value and
// appears in logs and in `cmp-injector explain`.
type Reason string

// Skip reasons: the pod is admitted unchanged.
const (
	ReasonNotLabelled     Reason = "not_labelled"
	ReasonAlreadyInjected Reason = "already_injected"
	// ReasonNotCreate and ReasonNotPod are the webhook's, for requests it
	// does not review (deletes and connects, other resources, subresources):
	// see Unreviewed.
	ReasonNotCreate Reason = "not_create"
	ReasonNotPod    Reason = "not_pod"
	// ReasonNotInjected: an UPDATE of a pod the injector does not own.
	ReasonNotInjected Reason = "not_injected"
	// ReasonOwnedUnchanged: an UPDATE that leaves what the injector owns as
	// it was, or changes it only to what the catalog allows.
	ReasonOwnedUnchanged Reason = "owned_unchanged"
	// ReasonTrustedUser: an UPDATE by a user the injector trusts (its own
	// service account, which keeps pods current with the catalog).
	ReasonTrustedUser Reason = "trusted_user"
	// ReasonNotRepoServer: a labelled pod with no repo-server container (see
	// catalog.RepoServerContainer).
	ReasonNotRepoServer Reason = "not_repo_server"
)

// Deny reasons: the pod is rejected with a message naming every problem.
const (
	ReasonUnknownPlugin       Reason = "unknown_plugin"
	ReasonPluginNotEnabled    Reason = "plugin_not_enabled"
	ReasonImageNotAllowed     Reason = "image_not_allowed"
	ReasonMalformedAnnotation Reason = "malformed_annotation"
	ReasonNameCollision       Reason = "name_collision"
	// ReasonSharedProcesses: the pod shares one process namespace between
	// its containers, so a plugin's command would reach the other sidecars
	// through /proc.
	ReasonSharedProcesses Reason = "shared_processes"
	// ReasonNotCatalog: what the injector owns in a pod (a config annotation,
	// a sidecar image, the status) differs from what the catalog allows.
	ReasonNotCatalog Reason = "not_catalog"
	// ReasonDebugAccess: an ephemeral (debug) container added to an injected
	// pod would reach the plugin server, its sockets or a sidecar.
	ReasonDebugAccess Reason = "debug_access"
	// ReasonNoCatalog and ReasonMalformedPod are used by the webhook: no valid
	// catalog is loaded yet, or the object in the review is not a pod.
	ReasonNoCatalog    Reason = "no_catalog"
	ReasonMalformedPod Reason = "malformed_pod"
)

// ReasonInjected labels successful injections.
const ReasonInjected Reason = "injected"

// DenyPrefix starts every denial message; users see it in ReplicaSet events
// (pkg/policy's validating policy starts its message with it too).
const DenyPrefix = "cmp-injector denied pod: "

// Problem is one reason to deny, with the human sentence for it.
type Problem struct {
	Reason  Reason `json:"reason"`
	Message string `json:"message"`
}

// Report is everything one injection decided. Logs, metrics, the admission
// response and the CLI all read it.
type Report struct {
	Decision Decision  `json:"decision"`
	Reasons  []Reason  `json:"reasons"`
	Problems []Problem `json:"problems,omitempty"`
	// Plugins are the plugins the pod asked for, in annotation order.
	Plugins []string `json:"plugins,omitempty"`
	// Pod is the mutated copy of the pod; nil unless injected.
	Pod    *corev1.Pod `json:"-"`
	Status *Status     `json:"status,omitempty"`
	// Patch is an RFC 6902 JSON Patch turning the input pod into Pod; nil unless injected.
	Patch []byte `json:"-"`
	// Warnings are what is admitted but likely to break, when it cannot be
	// known at admission (a hand-written sidecar's socket): the API server
	// shows them to the client, explain prints them.
	Warnings []string `json:"warnings,omitempty"`
	// Fault is whose fault a denial is (FaultPod unless the injector
	// could not decide).
	Fault Fault `json:"-"`
	// Server says where the sidecars take the plugin server from, and
	// why; nil unless injected.
	Server *ServerChoice `json:"server,omitempty"`
}

// ServerSource is where an injected pod's sidecars take the plugin server
// from. The values are stable codes, like reasons.
type ServerSource string

// Server sources.
const (
	// ServerCopied: the copy init container copies it from the catalog's
	// copy image into the var-files volume, and every sidecar runs that copy.
	ServerCopied ServerSource = "copied"
	// ServerFromImages: every plugin's catalog entry says its image carries
	// it (serverPath), so each sidecar runs its own image's and the pod gets
	// no copy init container.
	ServerFromImages ServerSource = "from_images"
)

// ServerChoice is the decision on the plugin server, as data.
type ServerChoice struct {
	Source ServerSource `json:"source"`
	// WithoutServerPath are the pod's plugins whose catalog entry has no
	// serverPath, in the pod's order: why the server is copied.
	WithoutServerPath []string `json:"withoutServerPath,omitempty"`
}

// Copies reports whether the pod gets the copy init container.
func (s *ServerChoice) Copies() bool { return s.Source == ServerCopied }

// Describe is the decision in one line, for explain and logs.
func (s *ServerChoice) Describe() string {
	if !s.Copies() {
		return "each sidecar runs cmp-server from its own image (every plugin's catalog entry has serverPath): no " +
			keys.CopyInitContainer + " init container"
	}
	if len(s.WithoutServerPath) == 0 {
		return "copied by the " + keys.CopyInitContainer + " init container from defaults.copyImage"
	}
	return "copied by the " + keys.CopyInitContainer + " init container from defaults.copyImage: no serverPath in the catalog for " +
		strings.Join(s.WithoutServerPath, ", ")
}

// Fault says whose fault a denial is, which the webhook turns into the
// response's HTTP status and Kubernetes reason.
type Fault uint8

// Faults.
const (
	// FaultPod: the pod asks for what the catalog refuses (forbidden).
	FaultPod Fault = iota
	// FaultServer: the injector cannot decide yet (no catalog loaded).
	FaultServer
	// FaultRequest: the request's object is not a pod that decodes.
	FaultRequest
)

// Allowed says whether the API server may admit the pod.
func (r *Report) Allowed() bool { return r.Decision != Denied }

// Status is the JSON written to the status annotation: what the injector owns
// in the pod, so a second pass and humans can tell it apart from the rest.
type Status struct {
	Plugins        []string `json:"plugins"`
	Containers     []string `json:"containers"`
	InitContainers []string `json:"initContainers"`
	Volumes        []string `json:"volumes"`
	// RepoServerEnv names the env vars added to the repo-server container.
	RepoServerEnv []string `json:"repoServerEnv,omitempty"`
	// Revision is the catalog revision the pod was injected at, or last
	// brought current with (cmp-injector serve's reconciler).
	Revision string `json:"revision"`
	// Stale lists what differs from a later catalog revision in a way only a
	// new pod takes (see CheckDrift); empty while the pod is current.
	Stale []Difference `json:"stale,omitempty"`
}

// JSON is the status annotation's value.
func (s *Status) JSON() string {
	b, err := json.Marshal(s)
	if err != nil {
		// Strings and slices of strings always marshal.
		panic(err)
	}
	return string(b)
}

// Message is the one-line explanation: for a denial, the text the API server
// shows to the user.
func (r *Report) Message() string {
	switch r.Decision {
	case Denied:
		msgs := make([]string, len(r.Problems))
		for i, p := range r.Problems {
			msgs[i] = p.Message
		}
		return joinBounded(DenyPrefix, msgs)
	case Injected:
		return "injected plugins: " + strings.Join(r.Plugins, ", ")
	default:
		causes := make([]string, len(r.Reasons))
		for i, reason := range r.Reasons {
			causes[i] = skipCause(reason)
		}
		return "skipped: " + strings.Join(causes, "; ")
	}
}

// skipCause says why a pod is admitted unchanged in words that name what to
// change; the reason code stays the metric label.
func skipCause(r Reason) string {
	switch r {
	case ReasonNotLabelled:
		return "no label " + keys.InjectLabel + "=" + keys.EnabledValue + " on the pod (template), so it is not opted in"
	case ReasonAlreadyInjected:
		return "the pod already has " + keys.StatusAnnotation + ": an earlier pass injected it"
	case ReasonNotCreate:
		return "not a CREATE or UPDATE of a pod"
	case ReasonNotPod:
		return "not a pod"
	case ReasonNotInjected:
		return "an UPDATE of a pod cmp-injector did not inject"
	case ReasonOwnedUnchanged:
		return "the UPDATE leaves what cmp-injector owns as the catalog has it"
	case ReasonTrustedUser:
		return "the UPDATE comes from a trusted user"
	case ReasonNotRepoServer:
		return "no container of the pod is Argo CD's repo-server (by name or program, the catalog's defaults.repoServerContainer), so it is left as it is"
	}
	return string(r)
}

func skipped(r Reason) *Report {
	return &Report{Decision: Skipped, Reasons: []Reason{r}}
}

func denied(plugins []string, problems []Problem) *Report {
	seen := map[Reason]bool{}
	var reasons []Reason
	for _, p := range problems {
		if !seen[p.Reason] {
			seen[p.Reason] = true
			reasons = append(reasons, p.Reason)
		}
	}
	sort.Slice(reasons, func(i, j int) bool { return reasons[i] < reasons[j] })
	return &Report{Decision: Denied, Reasons: reasons, Problems: capProblems(problems), Plugins: plugins}
}
