package cli

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/cmp-injector/cmp-injector/injector/policysync"
	"github.com/cmp-injector/cmp-injector/injector/reconcile"
	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/policy"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
	"github.com/cmp-injector/cmp-injector/pkg/version"
)

func policyCmd(ctx context.Context, args []string, stdio serving.IO) error {
	fs := serving.NewFlagSet("cmp-injector policy", "--catalog FILE [--name NAME] [--apply [--watch [--metrics-listen ADDR] [--reconcile ...]] [--bindings=false]]")
	catFile := fs.String("catalog", "", "plugin catalog file (required)")
	name := fs.String("name", policy.DefaultName, "name of the policies and their bindings")
	bindings := fs.Bool("bindings", true, "include the two bindings (the chart renders its own and sets this to false)")
	apply := fs.Bool("apply", false, "send the objects to the API server (server-side apply, field manager "+policysync.FieldManager+") instead of printing them")
	watch := fs.Bool("watch", false, "with --apply: keep running, and apply again whenever the catalog file changes; a catalog that does not load is reported and the policies in place are kept")
	poll := fs.Duration("poll-interval", 5*time.Second, "with --watch: how often the catalog file is checked for changes")
	resync := fs.Duration("resync", time.Minute, "with --watch: apply again this often even when the catalog is unchanged, so a policy deleted or edited by hand is restored")
	metricsListen := fs.String("metrics-listen", "", "with --watch: plain HTTP address for /metrics, /healthz and /readyz (ready once the catalog file's policies are applied); empty: none")
	logLevel := zapcore.InfoLevel
	fs.Var(&logLevel, "log-level", "with --watch: debug, info, warn or error")
	var rf reconcileFlags
	rf.register(fs.FlagSet)
	fs.Notes("Policy mode needs Kubernetes 1.36 or later (MutatingAdmissionPolicy in admissionregistration.k8s.io/v1).\n" +
		"With --watch --reconcile, the reconciler keeps injected pods current with the catalog applied, as serve's does.\n" +
		"See docs/policy-mode.md for what policy mode does not do.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *catFile == "":
		return fs.Errorf("--catalog is required")
	case *watch && !*apply:
		return fs.Errorf("--watch needs --apply: it keeps the cluster's policies equal to the catalog")
	case (rf.enabled || *metricsListen != "") && !*watch:
		return fs.Errorf("--reconcile and --metrics-listen need --watch")
	case *poll <= 0 || *resync <= 0:
		return fs.Errorf("--poll-interval and --resync must be positive, got %s and %s", *poll, *resync)
	}
	if err := rf.check(); err != nil {
		return fs.Errorf("%v", err)
	}
	opts := policy.Options{Name: *name}
	if !*apply {
		cat, err := loadForPolicy(*catFile, stdio)
		if err != nil {
			return err
		}
		set := policy.Render(cat, opts)
		if !*bindings {
			set.MutatingBinding, set.ValidatingBinding = nil, nil
		}
		b, err := set.YAML()
		if err != nil {
			return err
		}
		_, err = stdio.Stdout.Write(b)
		return err
	}
	client, err := rf.clientset()
	if err != nil {
		return err
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(stdio.Stderr), logLevel))
	defer func() { _ = log.Sync() }()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	o := policysync.Options{Client: client, Policy: opts, Bindings: *bindings, CatalogFile: *catFile,
		Poll: *poll, Resync: *resync, Log: log, Registerer: reg}
	if !*watch {
		cat, err := loadForPolicy(*catFile, stdio)
		if err != nil {
			return err
		}
		s, err := policysync.New(o)
		if err != nil {
			return err
		}
		return s.Apply(ctx, cat)
	}
	log.Info("starting cmp-injector policy", zap.String("version", version.Version), zap.String("catalog", *catFile), zap.String("name", *name))
	ctx, stop := serving.ShutdownContext(ctx)
	defer stop()
	return runPolicySync(ctx, o, reg, &rf, *metricsListen)
}

// runPolicySync runs the syncer, and beside it the metrics listener (on
// reg) and the reconciler when asked, until ctx ends.
func runPolicySync(ctx context.Context, o policysync.Options, reg *prometheus.Registry, rf *reconcileFlags, metricsListen string) error {
	var rec *reconcile.Reconciler
	// The pods follow the catalog the policies were applied from: the
	// syncer tells the reconciler, which reads it back from the syncer.
	o.OnApplied = func(*catalog.Catalog) {
		if rec != nil {
			rec.CatalogChanged()
		}
	}
	syncer, err := policysync.New(o)
	if err != nil {
		return err
	}
	if rf.enabled {
		if rec, err = rf.reconcilerFor(syncer.Catalog, reg, o.Log); err != nil {
			return err
		}
	}
	var ms *serving.MetricsServer
	if metricsListen != "" {
		l, err := net.Listen("tcp", metricsListen)
		if err != nil {
			return fmt.Errorf("metrics listener: %w", err)
		}
		ms = serving.NewMetricsServer(serving.MetricsRouter(reg, syncer.Ready), serving.MetricsOptions{}, nil)
		go func() { _ = ms.Serve(l) }()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if rec != nil {
			rec.Run(ctx)
		}
	}()
	syncer.Run(ctx)
	<-done
	if ms != nil {
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = ms.Shutdown(shut)
	}
	return nil
}

func loadForPolicy(file string, stdio serving.IO) (*catalog.Catalog, error) {
	cat, err := catalog.Load(file)
	if err != nil {
		return nil, fmt.Errorf("catalog %s: %w", file, err)
	}
	for _, w := range cat.Warnings {
		fmt.Fprintf(stdio.Stderr, "warning: catalog %s: %s\n", file, w)
	}
	return cat, nil
}
