// Package cli is the cmp-injector command line: the admission webhook that adds
// Argo CD plugin sidecars to repo-server pods, its offline twins and the
// certificate tool. cmd/cmp-injector only calls Main.
package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/cmp-injector/cmp-injector/certs"
	"github.com/cmp-injector/cmp-injector/injector"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
	"github.com/cmp-injector/cmp-injector/pkg/version"
)

// program is the command table; Main and the tests run it.
var program = serving.Program{
	Name:    "cmp-injector",
	Summary: "The admission webhook that adds Argo CD plugin sidecars to repo-server pods, its offline twins and the certificate tool.",
	Commands: []serving.Command{
		{Name: "serve", Summary: "run the admission webhook", Run: serve},
		{Name: "inject", Summary: "apply the webhook's injection to YAML documents (offline); exit 1 when one is denied", Run: injectCmd},
		{Name: "explain", Summary: "say whether each pod or workload would be injected, denied or skipped, and why; exit 1 when one is denied", Run: explainCmd},
		{Name: "adopt", Summary: "turn hand-written CMP sidecars (a repo-server workload, argo-helm's render, an ArgoCD resource, argocd-cm plugins) into catalog.yaml and an opted-in workload.yaml, with a report of what could not be carried over; exit 1 when something essential is lost", Run: adoptCmd},
		{Name: "doctor", Summary: "check an installation through the API, like linkerd check: webhook, certificate, catalog, namespaces, every opted-in pod (current or stale); exit 1 when a check fails", Run: doctorCmd},
		{Name: "policy", Summary: "write the catalog as a MutatingAdmissionPolicy and a ValidatingAdmissionPolicy (Kubernetes 1.36+), which the API server evaluates itself: injection without the webhook; --apply sends them, --watch keeps them equal to the catalog", Run: policyCmd},
		{Name: "certs", Summary: "issue a CA and a serving certificate for the webhook Service", Run: issue},
		serving.VersionCommand("cmp-injector", version.Version),
	},
	ExitCodes: "Exit codes: 0 success, 1 failure (inject, explain: an object is denied), 2 usage error.",
}

// Main runs the command in args (os.Args[1:]) and returns the exit code: 0, 1
// for a failure or a denial, 2 for a usage error.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return program.Main(ctx, args, serving.IO{Stdin: stdin, Stdout: stdout, Stderr: stderr})
}

// defaultGCPercent is the webhook's collector target: 400 gave +25% reviews/s
// over Go's 100 under load (make bench-e2e), for a heap of tens of MiB.
const defaultGCPercent = 400

func serve(ctx context.Context, args []string, stdio serving.IO) error {
	fs := serving.NewFlagSet("cmp-injector serve", "--catalog FILE --tls-cert-file FILE --tls-key-file FILE [flags]")
	var cfg injector.Options
	fs.StringVar(&cfg.CatalogFile, "catalog", "", "plugin catalog file (required)")
	fs.StringVar(&cfg.CertFile, "tls-cert-file", "", "serving certificate, PEM (required)")
	fs.StringVar(&cfg.KeyFile, "tls-key-file", "", "serving key, PEM (required)")
	fs.StringVar(&cfg.Listen, "listen", ":8443", "HTTPS address for /mutate (and /readyz, for doctor); the kubelet's probes use --metrics-listen")
	fs.StringVar(&cfg.MetricsListen, "metrics-listen", ":8080", "plain HTTP address for /metrics, /healthz, /readyz")
	fs.DurationVar(&cfg.Poll, "poll-interval", 5*time.Second, "how often catalog and certificate files are checked for changes")
	fs.DurationVar(&cfg.ShutdownDelay, "shutdown-delay", 3*time.Second, "time to keep serving, not ready, after SIGTERM")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 20*time.Second, "longest wait for in-flight reviews on shutdown")
	var trusted stringList
	fs.Var(&trusted, "trusted-user", "user allowed to change what the injector owns in a pod on UPDATE, e.g. its own service account (repeatable)")
	fs.IntVar(&cfg.MaxConnections, "max-connections", injector.DefaultMaxConnections, "connections the webhook port holds at once; a new one takes the slot of the oldest that has sent no valid review yet, and waits to be accepted when all have")
	fs.IntVar(&cfg.MaxConnectionsPerIP, "max-connections-per-ip", 0, "connections the webhook port holds from one client address, at most --max-connections; more are closed at once, so one pod cannot take every slot (0: "+strconv.Itoa(injector.DefaultMaxConnectionsPerIP)+", or --max-connections when lower; kube-apiserver keeps at most 25 idle connections per webhook host)")
	fs.IntVar(&cfg.MetricsConns.Max, "metrics-max-connections", serving.DefaultMetricsMaxConnections, "connections the metrics port (--metrics-listen) holds at once; a new one takes the slot of the oldest, so the kubelet's probe never waits behind idle ones")
	fs.IntVar(&cfg.MetricsConns.PerIP, "metrics-max-connections-per-ip", 0, "connections the metrics port holds from one client address, at most --metrics-max-connections; more are closed at once (0: "+strconv.Itoa(serving.DefaultMetricsMaxConnectionsPerIP)+", or --metrics-max-connections when lower)")
	logLevel := zapcore.InfoLevel
	fs.Var(&logLevel, "log-level", "debug, info, warn or error")
	logFlush := fs.Duration("log-flush-interval", time.Second, "longest time a log line waits in memory before it is written: lines go out in batches, which saves a system call per review under load, and at once for warnings, errors and on exit (0 = each line at once)")
	gcPercent := fs.Int("gc-percent", defaultGCPercent, "the Go collector's target (GOGC) when the environment sets none; with it, a soft memory limit of 90% of the container's unless GOMEMLIMIT is set (0 = the runtime's defaults)")
	var rf reconcileFlags
	rf.register(fs.FlagSet)
	probeNS := fs.String("sidecar-probe-namespace", "", "namespace of the dry-run pod that settles a catalog's defaults.nativeSidecars: auto (default: the pod's own); the dry run needs create on pods there, and stores nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := rf.check(); err != nil {
		return fs.Errorf("%v", err)
	}
	if *logFlush < 0 {
		return fs.Errorf("--log-flush-interval must not be negative, got %s", *logFlush)
	}
	cfg.TrustedUsers = trusted
	if err := cfg.Validate(); err != nil {
		return fs.Errorf("%v", err)
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	// No stack traces: every error the server logs is expected and says what
	// to do; a trace would only bury that.
	core, stopLog := serving.BufferedLogCore(zapcore.NewJSONEncoder(enc), stdio.Stderr, logLevel, *logFlush)
	defer func() { _ = stopLog() }()
	log := zap.New(core, zap.AddCaller())
	gc := serving.TuneGC(*gcPercent, serving.CgroupRoot)
	log.Info("starting cmp-injector", zap.String("version", version.Version),
		zap.String("gcPercent", gc.GCPercent), zap.Int64("memoryLimitBytes", gc.MemoryLimit), zap.String("memoryLimitFrom", gc.Source))
	ctx, stop := serving.ShutdownContext(ctx)
	defer stop()
	cfg.NativeSidecars = (&sidecarProbe{rf: &rf, namespace: *probeNS, log: log}).resolve
	srv := injector.New(cfg, log)
	if !rf.enabled {
		return srv.Run(ctx)
	}
	rec, err := rf.reconciler(srv, log)
	if err != nil {
		return err
	}
	srv.OnCatalogChange(rec.CatalogChanged)
	recCtx, stopRec := context.WithCancel(ctx)
	recDone := make(chan struct{})
	go func() { rec.Run(recCtx); close(recDone) }()
	err = srv.Run(ctx)
	stopRec()
	<-recDone
	return err
}

func issue(_ context.Context, args []string, stdio serving.IO) error {
	fs := serving.NewFlagSet("cmp-injector certs", "--service NAME --namespace NS [flags]")
	var o certs.Options
	var dns stringList
	var ips ipList
	fs.StringVar(&o.Service, "service", "", "webhook Service name (required)")
	fs.StringVar(&o.Namespace, "namespace", "", "webhook Service namespace (required)")
	fs.Var(&dns, "dns", "extra DNS name (repeatable)")
	fs.Var(&ips, "ip", "extra IP address (repeatable)")
	fs.DurationVar(&o.Validity, "validity", 8760*time.Hour, "validity of the CA and the certificate")
	outDir := fs.String("out-dir", ".", "directory for ca.crt, tls.crt and tls.key")
	secret := fs.String("secret-name", "", "print a kubernetes.io/tls Secret with this name to stdout instead of writing files")
	caDir := fs.String("ca-dir", "", "keep the CA (ca.crt, ca.key) in this directory and sign with it: made on first use, reused after, so rotating the serving certificate never changes the caBundle")
	rotateCA := fs.Bool("rotate-ca", false, "with --ca-dir: replace the CA; ca.crt of the output is the new and the old CA, for the caBundle during the switch")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.Service == "" || o.Namespace == "" {
		return fs.Errorf("--service and --namespace are required")
	}
	if *rotateCA && *caDir == "" {
		return fs.Errorf("--rotate-ca needs --ca-dir, where the CA to replace is kept")
	}
	o.DNSNames, o.IPs = dns, ips
	var ca *certs.CA
	var err error
	switch {
	case *rotateCA:
		ca, err = certs.Rotate(*caDir, o)
	case *caDir != "":
		ca, _, err = certs.OpenCA(*caDir, o)
	default:
		ca, err = certs.NewCA(o)
	}
	if err != nil {
		return err
	}
	b, err := ca.Issue(o)
	if err != nil {
		return err
	}
	if *secret != "" {
		y, err := b.Secret(*secret, o.Namespace)
		if err != nil {
			return err
		}
		_, err = stdio.Stdout.Write(y)
		return err
	}
	return b.WriteFiles(*outDir)
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

type ipList []net.IP

func (l *ipList) String() string { return fmt.Sprint([]net.IP(*l)) }
func (l *ipList) Set(v string) error {
	ip := net.ParseIP(v)
	if ip == nil {
		return fmt.Errorf("not an IP address: %q", v)
	}
	*l = append(*l, ip)
	return nil
}
