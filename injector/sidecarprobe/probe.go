// Package sidecarprobe asks an API server whether it accepts native sidecars
// (init containers with restartPolicy: Always), by a server-side dry run of a
// pod shaped like an injected one. A version number cannot say it: v1.28 has
// native sidecars only with the SidecarContainers feature gate on, v1.29 to
// v1.32 may have it turned off, and a distribution's version string may say
// anything. The dry run goes through the same defaulting, validation and
// admission a real pod does, and stores nothing.
//
// decide is the decision, a pure function over the API server's answer;
// Probe is the one call; Resolver keeps a decision for the process.
package sidecarprobe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// generateName prefixes the dry-run pod's name: generated, so that no pod of
// the namespace can make the create fail with AlreadyExists. A dry run stores
// nothing, so no pod of this name is ever seen.
const generateName = "cmp-injector-native-sidecars-probe-"

// sidecarName is the probe pod's restartable init container.
const sidecarName = "sidecar"

// timeout bounds one dry run.
const timeout = 15 * time.Second

// probePod is the pod the dry run creates in namespace: one init container with
// restartPolicy: Always and a postStart hook, as every injected native
// sidecar has (pkg/inject makeNative). Both fields matter. An API server
// without the feature drops restartPolicy silently (v1.28 with the gate off
// clears it, v1.27 does not know the field), so an accepted pod proves
// nothing by itself; the lifecycle, which only restartable init containers
// may have, makes such a server refuse the pod with 422 Invalid, which is
// what it does to injected pods. The pod is the restricted Pod Security
// profile's and has small requests and limits, so that neither PodSecurity
// nor a quota that wants limits refuses it for reasons of its own; it carries
// no label our webhook selects.
func probePod(namespace, image string) *corev1.Pod {
	always := corev1.ContainerRestartPolicyAlways
	no, yes := false, true
	uid := int64(65532)
	restricted := &corev1.SecurityContext{
		AllowPrivilegeEscalation: &no,
		ReadOnlyRootFilesystem:   &yes,
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: generateName, Namespace: namespace},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: &no,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   &yes,
				RunAsUser:      &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			InitContainers: []corev1.Container{{
				Name: sidecarName, Image: image, RestartPolicy: &always,
				Command:         []string{"/probe"},
				Lifecycle:       &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/probe"}}}},
				SecurityContext: restricted, Resources: res,
			}},
			Containers: []corev1.Container{{
				Name: "main", Image: image, Command: []string{"/probe"},
				SecurityContext: restricted, Resources: res,
			}},
		},
	}
}

// Decision is what the API server's answer says.
type Decision struct {
	// Native: the API server keeps restartPolicy: Always on init containers.
	Native bool
	// Reason is what the API server said, in words for a log line or doctor.
	Reason string
}

// Undecided is decide's error: the answer says nothing about native sidecars
// (no permission to create pods, an admission policy refusing the pod for
// something else, no answer at all). Forbidden tells RBAC's refusal from the
// rest, for doctor's fallback.
type Undecided struct {
	Err       error
	Forbidden bool
}

func (u *Undecided) Error() string { return u.Err.Error() }
func (u *Undecided) Unwrap() error { return u.Err }

// decide reads the answer to the dry-run create of probePod: the pod the API
// server returned, or its error.
//
//   - Accepted with restartPolicy: Always kept: native sidecars.
//   - Accepted with it dropped (a server without the feature, had the pod no
//     lifecycle): classic.
//   - 422 Invalid naming the init container's lifecycle or restartPolicy (v1.27:
//     "lifecycle: Forbidden: may not be set for init containers"; v1.28 to
//     v1.32 with the gate off: "... without restartPolicy=Always"), or 400 for
//     restartPolicy as an unknown field (strict field validation on v1.27):
//     classic.
//   - Anything else: *Undecided.
func decide(created *corev1.Pod, err error) (Decision, error) {
	if err == nil {
		if created == nil || len(created.Spec.InitContainers) == 0 {
			return Decision{}, &Undecided{Err: errors.New("the API server accepted the dry-run pod but returned no init container to look at")}
		}
		rp := created.Spec.InitContainers[0].RestartPolicy
		if rp != nil && *rp == corev1.ContainerRestartPolicyAlways {
			return Decision{Native: true, Reason: "the API server accepts an init container with restartPolicy: Always and a postStart hook (dry run)"}, nil
		}
		return Decision{Reason: "the API server accepted the dry-run pod but dropped restartPolicy: Always from its init container: it has no native sidecars (SidecarContainers feature gate off)"}, nil
	}
	if refusesSidecar(err) {
		return Decision{Reason: "the API server refuses native sidecars: " + err.Error()}, nil
	}
	var u Undecided
	u.Forbidden = apierrors.IsForbidden(err)
	u.Err = fmt.Errorf("the dry run of a pod with a restartPolicy: Always init container got no answer about native sidecars: %w", err)
	return Decision{}, &u
}

// refusesSidecar: err is the API server refusing the init container's
// sidecar fields, and nothing else of the pod.
func refusesSidecar(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	s := st.Status()
	switch {
	case apierrors.IsInvalid(err):
		if s.Details == nil || len(s.Details.Causes) == 0 {
			return mentionsSidecarField(s.Message)
		}
		for _, c := range s.Details.Causes {
			if !isSidecarField(c.Field) {
				return false
			}
		}
		return true
	case apierrors.IsBadRequest(err):
		// strict decoding error: unknown field "spec.initContainers[0].restartPolicy"
		return strings.Contains(s.Message, "unknown field") && mentionsSidecarField(s.Message)
	}
	return false
}

// sidecarFields are the paths of the probe's init container an API server
// without native sidecars refuses.
var sidecarFields = []string{
	"spec.initContainers[0].lifecycle",
	"spec.initContainers[0].restartPolicy",
}

func isSidecarField(f string) bool {
	for _, s := range sidecarFields {
		if f == s || strings.HasPrefix(f, s+".") {
			return true
		}
	}
	return false
}

func mentionsSidecarField(msg string) bool {
	for _, s := range sidecarFields {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// Probe runs the dry run in namespace with client.
func Probe(ctx context.Context, client kubernetes.Interface, namespace, image string) (Decision, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	created, err := client.CoreV1().Pods(namespace).Create(ctx, probePod(namespace, image), metav1.CreateOptions{
		DryRun: []string{metav1.DryRunAll},
		// The probe is ours: a warning that a field is unknown is an
		// answer too, so let the server say it as an error.
		FieldValidation: metav1.FieldValidationStrict,
	})
	d, err := decide(created, err)
	if u, ok := errors.AsType[*Undecided](err); ok && u.Forbidden {
		u.Err = fmt.Errorf("%w (a dry run needs the permission to create pods in namespace %s, though it stores none)", u.Err, namespace)
	}
	return d, err
}

// Resolver answers for catalog.Options.NativeSidecars: it probes and keeps
// the decision for the life of the process (an API server gains or loses
// native sidecars only with a restart of its own); an undecided answer is
// tried again Attempts times, Delay apart (a namespace's default
// ServiceAccount not made yet, an API server restarting, RBAC caches behind
// helm's install), then returned and not kept, so the next catalog load asks
// again.
type Resolver struct {
	Client    kubernetes.Interface
	Namespace string
	// Decided is called with each new decision (a log line).
	Decided func(Decision)
	// Attempts (0: 3) and Delay (0: 2 s) bound the tries of one Resolve.
	Attempts int
	Delay    time.Duration

	mu       sync.Mutex
	decision *Decision
}

// Resolve is a catalog.NativeSidecarsResolver.
func (r *Resolver) Resolve(image string) (bool, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.decision == nil {
		attempts, delay := r.Attempts, r.Delay
		if attempts <= 0 {
			attempts = 3
		}
		if delay <= 0 {
			delay = 2 * time.Second
		}
		d, err := Probe(context.Background(), r.Client, r.Namespace, image)
		for try := 1; err != nil && try < attempts; try++ {
			time.Sleep(delay)
			d, err = Probe(context.Background(), r.Client, r.Namespace, image)
		}
		if err != nil {
			return false, "", fmt.Errorf("%w (%d tries, %s apart)", err, attempts, delay)
		}
		r.decision = &d
		if r.Decided != nil {
			r.Decided(d)
		}
	}
	return r.decision.Native, r.decision.Reason, nil
}
