// Package cli is the cmp-injector command line: the admission webhook that adds
// Argo CD plugin sidecars to repo-server pods, its offline twins and the
// certificate tool. cmd/cmp-injector only calls Main.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/cmp-injector/cmp-injector/certs"
	"github.com/cmp-injector/cmp-injector/injector"
	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/version"
)

const usage = `usage: cmp-injector <command> [flags]

commands:
  serve     run the admission webhook
  inject    apply the webhook's injection to YAML documents (offline)
  explain   say whether each pod/workload would be injected, denied or skipped
  certs     issue a CA and a serving certificate for the webhook Service
  version   print the version
`

// Main runs the command in args (os.Args[1:]) and returns the exit code: 0, 1 for
// a failure, 2 for a usage error.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) < 1 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	err := run(args[0], args[1:], stdin, stdout)
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, err)
		return 2
	default:
		fmt.Fprintln(stderr, "cmp-injector:", err)
		return 1
	}
}

type usageError string

func (e usageError) Error() string { return string(e) }

func run(cmd string, args []string, stdin io.Reader, stdout io.Writer) error {
	switch cmd {
	case "serve":
		return serve(args)
	case "inject":
		return offline(args, stdin, stdout, false)
	case "explain":
		return offline(args, stdin, stdout, true)
	case "certs":
		return issue(args, stdout)
	case "version", "--version":
		_, err := fmt.Fprintln(stdout, version.Version)
		return err
	case "help", "-h", "--help":
		_, err := fmt.Fprint(stdout, usage)
		return err
	}
	return usageError(fmt.Sprintf("unknown command %q\n%s", cmd, usage))
}

func parse(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(os.Stderr)
	if err := fs.Parse(args); err != nil {
		return usageError(err.Error())
	}
	if fs.NArg() > 0 {
		return usageError(fmt.Sprintf("%s: unexpected arguments %q", fs.Name(), fs.Args()))
	}
	return nil
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var cfg injector.Config
	fs.StringVar(&cfg.CatalogFile, "catalog", "", "plugin catalog file (required)")
	fs.StringVar(&cfg.CertFile, "tls-cert-file", "", "serving certificate, PEM (required)")
	fs.StringVar(&cfg.KeyFile, "tls-key-file", "", "serving key, PEM (required)")
	fs.StringVar(&cfg.Listen, "listen", ":8443", "HTTPS address for /mutate, /healthz, /readyz")
	fs.StringVar(&cfg.MetricsListen, "metrics-listen", ":8080", "plain HTTP address for /metrics, /healthz, /readyz")
	fs.DurationVar(&cfg.Poll, "poll-interval", 5*time.Second, "how often catalog and certificate files are checked for changes")
	fs.DurationVar(&cfg.ShutdownDelay, "shutdown-delay", 3*time.Second, "time to keep serving, not ready, after SIGTERM")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 20*time.Second, "longest wait for in-flight reviews on shutdown")
	var trusted stringList
	fs.Var(&trusted, "trusted-user", "user allowed to change what the injector owns in a pod on UPDATE, e.g. its own service account (repeatable)")
	fs.IntVar(&cfg.MaxConnections, "max-connections", injector.DefaultMaxConnections, "connections the webhook port holds at once; more wait to be accepted")
	logLevel := zapcore.InfoLevel
	fs.Var(&logLevel, "log-level", "debug, info, warn or error")
	if err := parse(fs, args); err != nil {
		return err
	}
	if cfg.CatalogFile == "" || cfg.CertFile == "" || cfg.KeyFile == "" {
		return usageError("serve: --catalog, --tls-cert-file and --tls-key-file are required")
	}
	cfg.TrustedUsers = trusted
	if cfg.MaxConnections < 1 {
		return usageError(fmt.Sprintf("serve: --max-connections must be at least 1, got %d", cfg.MaxConnections))
	}
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(logLevel)
	zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	log, err := zc.Build()
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	log.Info("starting cmp-injector", zap.String("version", version.Version))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return injector.New(cfg, log).Run(ctx)
}

func offline(args []string, stdin io.Reader, stdout io.Writer, explain bool) error {
	name := "inject"
	if explain {
		name = "explain"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	catFile := fs.String("catalog", "", "plugin catalog file (required)")
	in := fs.String("f", "-", "input YAML file, - for stdin")
	ns := fs.String("namespace", "", "namespace to decide for (default: each object's metadata.namespace, else \"default\")")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *catFile == "" {
		return usageError(name + ": --catalog is required")
	}
	cat, err := catalog.Load(*catFile)
	if err != nil {
		return fmt.Errorf("catalog %s: %w", *catFile, err)
	}
	r := stdin
	if *in != "-" {
		f, err := os.Open(*in)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	objs, err := injector.Process(r, cat, *ns)
	if err != nil {
		return err
	}
	if explain {
		return injector.Explain(stdout, objs)
	}
	// Nothing is written when any object is denied: half an output would be
	// applied by a pipeline that does not check the exit code.
	if err := injector.Denials(objs); err != nil {
		return err
	}
	return injector.WriteObjects(stdout, objs)
}

func issue(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("certs", flag.ContinueOnError)
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
	if err := parse(fs, args); err != nil {
		return err
	}
	if o.Service == "" || o.Namespace == "" {
		return usageError("certs: --service and --namespace are required")
	}
	if *rotateCA && *caDir == "" {
		return usageError("certs: --rotate-ca needs --ca-dir, where the CA to replace is kept")
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
		_, err = stdout.Write(y)
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
