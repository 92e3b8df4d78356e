package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// doctorReport is what `cmp-injector doctor` found, grouped by what an admin
// checks in turn: can I reach the cluster, is the webhook wired, is its
// certificate good, does the catalog load, which namespaces and pods are in.
type doctorReport struct {
	OK     bool          `json:"ok"`
	Groups []*checkGroup `json:"groups"`
}

type checkGroup struct {
	Name   string   `json:"name"`
	Checks []*check `json:"checks"`
}

type check struct {
	OK      bool   `json:"ok"`
	Message string `json:"message"`
	// Hint says what to do about a failed check.
	Hint string     `json:"hint,omitempty"`
	Pod  *podReport `json:"pod,omitempty"`
}

// group returns the group called name, made on first use.
func (r *doctorReport) group(name string) *checkGroup {
	for _, g := range r.Groups {
		if g.Name == name {
			return g
		}
	}
	g := &checkGroup{Name: name}
	r.Groups = append(r.Groups, g)
	return g
}

func (g *checkGroup) pass(msg string) { g.Checks = append(g.Checks, &check{OK: true, Message: msg}) }
func (g *checkGroup) fail(msg, hint string) {
	g.Checks = append(g.Checks, &check{Message: msg, Hint: hint})
}
func (g *checkGroup) passPod(p *podReport, msg string) {
	g.Checks = append(g.Checks, &check{OK: true, Message: msg, Pod: p})
}
func (g *checkGroup) failPod(p *podReport, msg, hint string) {
	g.Checks = append(g.Checks, &check{Message: msg, Hint: hint, Pod: p})
}

func (r *doctorReport) failed() int {
	n := 0
	for _, g := range r.Groups {
		for _, c := range g.Checks {
			if !c.OK {
				n++
			}
		}
	}
	return n
}

func (r *doctorReport) writeText(w io.Writer) {
	for i, g := range r.Groups {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, g.Name)
		fmt.Fprintln(w, "------------------------------")
		for _, c := range g.Checks {
			mark := "✔"
			if !c.OK {
				mark = "✘"
			}
			fmt.Fprintf(w, "%s %s\n", mark, c.Message)
			if !c.OK && c.Hint != "" {
				fmt.Fprintf(w, "    hint: %s\n", c.Hint)
			}
		}
	}
	fmt.Fprintln(w)
	if n := r.failed(); n > 0 {
		fmt.Fprintf(w, "Status: %d check(s) failed\n", n)
	} else {
		fmt.Fprintln(w, "Status: all checks passed")
	}
}

func doctorCmd(ctx context.Context, args []string, stdio serving.IO) error {
	fs := serving.NewFlagSet("cmp-injector doctor", "[--kubeconfig FILE] [--namespace NS] [--catalog FILE] [-o text|json]")
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
	kubeContext := fs.String("context", "", "kubeconfig context (default: the current one)")
	ns := fs.String("namespace", "cmp-injector", "namespace the injector is installed in")
	catFile := fs.String("catalog", "", "judge pods against this catalog file instead of the injector's ConfigMap")
	output := fs.String("o", "text", "output: text or json")
	timeout := fs.Duration("timeout", 30*time.Second, "give up on the API after this long")
	fs.Notes("Checks the webhook configuration, its certificate, the catalog, the enabled namespaces, every pod that opts in (injected or not and why, current or stale and what differs, sidecar restarts) and the reconciler. Exit codes: 0 all checks passed, 1 a check failed, 2 usage error.")
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
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	d := &doctor{client: client, host: cfg.Host, namespace: *ns, catalogFile: *catFile, now: time.Now()}
	d.run(ctx)
	d.report.OK = d.report.failed() == 0
	if *output == "json" {
		enc := json.NewEncoder(stdio.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(&d.report); err != nil {
			return err
		}
	} else {
		d.report.writeText(stdio.Stdout)
	}
	if !d.report.OK {
		return &serving.ExitError{Code: serving.ExitFailure}
	}
	return nil
}
