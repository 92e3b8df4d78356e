package cli

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cmp-injector/cmp-injector/injector"
	"github.com/cmp-injector/cmp-injector/injector/reconcile"
	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// reconcileFlags are serve's flags for the day-2 reconciler.
type reconcileFlags struct {
	enabled                                   bool
	kubeconfig, leaseNamespace, leaseName, id string
	rollout, nsSelector                       string
	leaseDuration, renewDeadline, retryPeriod time.Duration
	resync                                    time.Duration
}

// serviceAccountNamespace is where the kubelet tells a pod its namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

func (f *reconcileFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.enabled, "reconcile", false, "keep injected pods current with the catalog: update their plugin.yaml annotations live, report stale pods (needs API access: in-cluster or --kubeconfig)")
	fs.StringVar(&f.nsSelector, "namespace-selector", keys.NamespaceEnabledLabel+"="+keys.EnabledValue, "with --reconcile: label selector of the namespaces to look after; the webhook's namespaceSelector (the chart renders it)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file for --reconcile and for the dry run of a catalog's defaults.nativeSidecars: auto (default: the pod's service account)")
	fs.StringVar(&f.leaseNamespace, "leader-election-namespace", "", "with --reconcile: namespace of the Lease the replicas elect a leader with (default: the pod's own)")
	fs.StringVar(&f.leaseName, "leader-election-name", "cmp-injector-reconciler", "with --reconcile: name of that Lease")
	fs.StringVar(&f.id, "leader-election-identity", "", "with --reconcile: this replica's name in the Lease (default: host name and a random suffix)")
	fs.DurationVar(&f.leaseDuration, "leader-election-lease-duration", 15*time.Second, "with --reconcile: how long a Lease lasts without renewal")
	fs.DurationVar(&f.renewDeadline, "leader-election-renew-deadline", 10*time.Second, "with --reconcile: how long the leader retries renewing before it stops acting")
	fs.DurationVar(&f.retryPeriod, "leader-election-retry-period", 2*time.Second, "with --reconcile: how often the Lease is tried")
	fs.DurationVar(&f.resync, "reconcile-resync", 10*time.Minute, "with --reconcile: re-check every injected pod this often")
	fs.StringVar(&f.rollout, "rollout", reconcile.RolloutOff, "with --reconcile: off (stale pods are reported; restarting is the admin's) or auto (restart the Deployment of stale pods)")
}

func (f *reconcileFlags) check() error {
	if f.rollout != reconcile.RolloutOff && f.rollout != reconcile.RolloutAuto {
		return fmt.Errorf("--rollout must be %s or %s, got %q", reconcile.RolloutOff, reconcile.RolloutAuto, f.rollout)
	}
	if _, err := labels.Parse(f.nsSelector); err != nil {
		return fmt.Errorf("--namespace-selector: %w", err)
	}
	if f.leaseDuration <= f.renewDeadline || f.renewDeadline <= f.retryPeriod || f.retryPeriod <= 0 {
		return errors.New("leader election wants --leader-election-lease-duration > --leader-election-renew-deadline > --leader-election-retry-period > 0")
	}
	return nil
}

// reconciler builds the reconciler with a client for the cluster.
func (f *reconcileFlags) reconciler(srv *injector.Server, log *zap.Logger) (*reconcile.Reconciler, error) {
	return f.reconcilerFor(srv.Catalog, srv.Registry(), log)
}

// reconcilerFor builds the reconciler for the catalog cat returns, its
// metrics in reg.
func (f *reconcileFlags) reconcilerFor(cat func() *catalog.Catalog, reg prometheus.Registerer, log *zap.Logger) (*reconcile.Reconciler, error) {
	client, err := f.clientset()
	if err != nil {
		return nil, fmt.Errorf("--reconcile: %w", err)
	}
	ns, err := ownNamespace(f.leaseNamespace, "--leader-election-namespace")
	if err != nil {
		return nil, fmt.Errorf("--reconcile: %w", err)
	}
	id := f.id
	if id == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		// The suffix keeps two processes on one host (or a restarted pod
		// whose old Lease is still held) from sharing an identity.
		id = host + "_" + hex.EncodeToString(b[:])
	}
	return reconcile.New(reconcile.Options{
		Client: client, Catalog: cat,
		LeaseNamespace: ns, LeaseName: f.leaseName, Identity: id,
		LeaseDuration: f.leaseDuration, RenewDeadline: f.renewDeadline, RetryPeriod: f.retryPeriod,
		Resync: f.resync, Rollout: f.rollout, NamespaceSelector: f.nsSelector, Log: log, Registerer: reg,
	})
}

// clientset is a client of the API server restConfig points at, as the
// injector (its user agent).
func (f *reconcileFlags) clientset() (*kubernetes.Clientset, error) {
	cfg, err := f.restConfig()
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "cmp-injector"
	return kubernetes.NewForConfig(cfg)
}

// ownNamespace is given, else the namespace of the pod the injector runs in
// (its service account's); outside a pod the flag that gives it is required.
func ownNamespace(given, flag string) (string, error) {
	if given != "" {
		return given, nil
	}
	b, err := os.ReadFile(serviceAccountNamespace)
	if err != nil {
		return "", errors.New(flag + " is required outside a pod")
	}
	return strings.TrimSpace(string(b)), nil
}

func (f *reconcileFlags) restConfig() (*rest.Config, error) {
	if f.kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no --kubeconfig and not in a pod with a service account token: %w", err)
	}
	return cfg, nil
}
