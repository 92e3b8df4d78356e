package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cmp-injector/cmp-injector/injector/doctor"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// doctorCmd is `cmp-injector doctor`: flags, a client, and the report of
// package doctor, as text or JSON.
func doctorCmd(ctx context.Context, args []string, stdio serving.IO) error {
	fs := serving.NewFlagSet("cmp-injector doctor", "[--kubeconfig FILE] [--namespace NS] [--catalog FILE] [-o text|json] [--wait DURATION]")
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
	kubeContext := fs.String("context", "", "kubeconfig context (default: the current one)")
	ns := fs.String("namespace", "cmp-injector", "namespace the injector is installed in")
	catFile := fs.String("catalog", "", "judge pods against this catalog file instead of the injector's ConfigMap")
	output := fs.String("o", "text", "output: text or json")
	timeout := fs.Duration("timeout", 30*time.Second, "give up on the API after this long (each attempt)")
	wait := fs.Duration("wait", 0, "while every failed check is one that may clear by itself (retryable in -o json: pods starting, a certificate being issued, an election), check again every 2s for this long")
	fs.Notes("Checks the webhook configuration, its certificate, the catalog, the enabled namespaces, every pod that opts in (injected or not and why, current or stale and what differs, sidecar restarts) and the reconciler. Each check has an ID, a severity (error or warning: ‼ in text, not failing) and says whether it is retryable (--wait). Exit codes: 0 no error (warnings allowed), 1 a check failed, 2 usage error.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *output != "text" && *output != "json" {
		return fs.Errorf("-o must be text or json, got %q", *output)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: *kubeContext}).ClientConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.Timeout = *timeout
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout+*wait)
	defer cancel()
	opts := doctor.Options{Client: client, Host: cfg.Host, Namespace: *ns, CatalogFile: *catFile, Wait: *wait}
	if *output == "text" {
		opts.OnRetry = func(failed []*doctor.Result, next time.Duration) {
			fmt.Fprintf(stdio.Stderr, "%d retryable check(s) failed (first: %s); checking again in %s\n", len(failed), failed[0].ID, next)
		}
	}
	report := doctor.Run(ctx, opts)
	if *output == "json" {
		enc := json.NewEncoder(stdio.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			return err
		}
	} else {
		report.WriteText(stdio.Stdout)
	}
	if !report.OK {
		return &serving.ExitError{Code: serving.ExitFailure}
	}
	return nil
}
