// Package doctor checks an installation of cmp-injector through the API,
// the way an admin would with kubectl, and says what is wrong and what to
// do: the webhook configuration and its endpoints, the serving certificate,
// the catalog, the enabled namespaces, every pod that opts in, and the
// reconciler's Lease. Each thing it checks is a Check, data with a stable ID,
// a severity, a default hint and whether a failure may clear by itself
// (retryable), in the manner of linkerd's healthcheck checkers. It decides
// nothing about injection itself: those questions go to pkg/inject, as in the
// webhook.
package doctor

// Severity is what a failed check means.
type Severity string

// Severities.
const (
	// Error: something is broken now; doctor exits 1.
	Error Severity = "error"
	// Warning: it works now but will not for long, or not as the admin
	// meant it; doctor says so and still exits 0.
	Warning Severity = "warning"
)

// Check is one thing doctor checks. A check yields any number of results
// (one per webhook configuration, per pod, ...), each carrying the check's
// ID, severity and retryable flag.
type Check struct {
	// ID is stable across releases: scripts key on it in -o json.
	ID       string
	Severity Severity
	// Retryable: a failure may clear by itself soon (pods starting,
	// cert-manager issuing, an election), so doctor --wait looks again.
	Retryable bool
	// Hint is the advice on failure when the finding has no more specific
	// one.
	Hint string
}

// The checks, by group, in the order doctor makes them.
var (
	// cluster
	checkAPIReachable = Check{ID: "cluster.api-reachable", Severity: Error, Hint: "check --kubeconfig and the current context (kubectl cluster-info)"}

	// webhook
	checkWebhookListable   = Check{ID: "webhook.listable", Severity: Error, Retryable: true, Hint: "doctor needs cluster-wide read access (a cluster admin's kubeconfig)"}
	checkWebhookConfigured = Check{ID: "webhook.configured", Severity: Error}
	checkWebhookCABundle   = Check{ID: "webhook.ca-bundle", Severity: Error, Retryable: true,
		Hint: "with certificates.mode=certManager check that cert-manager's cainjector runs; with mode secret set certificates.caBundle"}
	checkWebhookService   = Check{ID: "webhook.service", Severity: Error, Hint: "the chart creates it; reinstall or check the release namespace"}
	checkWebhookEndpoints = Check{ID: "webhook.endpoints", Severity: Error, Retryable: true}
	checkWebhookURL       = Check{ID: "webhook.url", Severity: Error, Hint: "set webhook.url to https://host:port/mutate"}
	checkWebhookReachable = Check{ID: "webhook.reachable", Severity: Error, Retryable: true, Hint: "is the injector running and listening there?"}
	checkWebhookReady     = Check{ID: "webhook.ready", Severity: Error, Retryable: true, Hint: "its log says why: a catalog or certificate it cannot load"}

	// certificates
	checkCertSource = Check{ID: "certificates.source", Severity: Error, Hint: "pass --namespace, the namespace the chart is installed in"}
	checkCertSecret = Check{ID: "certificates.secret", Severity: Error, Retryable: true}
	checkCertBundle = Check{ID: "certificates.ca-bundle-pem", Severity: Error, Hint: "set it to the base64 PEM of the CA (certificates.caBundle)"}
	checkCertVerify = Check{ID: "certificates.verify", Severity: Error, Retryable: true,
		Hint: "the certificate was reissued by another CA: update the caBundle (cmp-injector certs --ca-dir keeps the CA; cert-manager's cainjector does it for mode certManager)"}
	checkCertExpiry = Check{ID: "certificates.expiry", Severity: Warning}

	// catalog
	checkCatalogSource = Check{ID: "catalog.source", Severity: Error}
	checkCatalogValid  = Check{ID: "catalog.valid", Severity: Error,
		Hint: "the injector keeps serving the last valid catalog; fix the values and helm upgrade (cmp-injector explain --catalog FILE checks a file offline)"}
	checkCatalogSidecarKind = Check{ID: "catalog.native-sidecars", Severity: Error,
		Hint: "set defaults.nativeSidecars: false (classic sidecars, appended to containers) or auto (the injector asks the API server at start-up), " +
			"or give the API server native sidecars (Kubernetes 1.29+, or 1.28 with --feature-gates=SidecarContainers=true)"}

	// namespaces
	checkNamespacesListable = Check{ID: "namespaces.listable", Severity: Error, Retryable: true}
	checkNamespacesEnabled  = Check{ID: "namespaces.enabled", Severity: Error}
	checkCatalogNamespaces  = Check{ID: "namespaces.catalog-selected", Severity: Warning}

	// repo-server pods
	checkPodsListable    = Check{ID: "pods.listable", Severity: Error, Retryable: true}
	checkPodsSkipped     = Check{ID: "pods.skipped", Severity: Error}
	checkPodRepoServer   = Check{ID: "pods.repo-server", Severity: Error}
	checkPodInjected     = Check{ID: "pods.injected", Severity: Error}
	checkPodStatus       = Check{ID: "pods.status", Severity: Error}
	checkPodCurrent      = Check{ID: "pods.current", Severity: Error}
	checkPodConfigLive   = Check{ID: "pods.config-updated", Severity: Error, Retryable: true}
	checkPodConfigOwned  = Check{ID: "pods.config-catalogs", Severity: Error}
	checkSidecarRestarts = Check{ID: "pods.sidecar-restarts", Severity: Warning}

	// reconciler
	checkAdmissionMode  = Check{ID: "admission.mode", Severity: Error}
	checkPolicyBindings = Check{ID: "policy.bindings", Severity: Error}
	checkPolicyCurrent  = Check{ID: "policy.current", Severity: Error, Retryable: true}

	checkReconcilerLease = Check{ID: "reconciler.lease", Severity: Error, Retryable: true,
		Hint: "the injector's logs in the install namespace say why"}
)

// Checks lists every check doctor makes, in order.
func Checks() []Check {
	return []Check{
		checkAPIReachable, checkAdmissionMode,
		checkWebhookListable, checkWebhookConfigured, checkWebhookCABundle, checkWebhookService, checkWebhookEndpoints,
		checkWebhookURL, checkWebhookReachable, checkWebhookReady,
		checkCertSource, checkCertSecret, checkCertBundle, checkCertVerify, checkCertExpiry,
		checkCatalogSource, checkCatalogValid, checkCatalogSidecarKind,
		checkPolicyBindings, checkPolicyCurrent,
		checkNamespacesListable, checkNamespacesEnabled, checkCatalogNamespaces,
		checkPodsListable, checkPodsSkipped, checkPodRepoServer, checkPodInjected, checkPodStatus, checkPodCurrent,
		checkPodConfigLive, checkPodConfigOwned, checkSidecarRestarts,
		checkReconcilerLease,
	}
}
