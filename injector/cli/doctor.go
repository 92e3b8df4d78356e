package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
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
	// SkippedPods counts, per namespace, the labelled pods in namespaces
	// the webhook does not select: doctor does not check them.
	SkippedPods map[string]int `json:"skippedPods,omitempty"`
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
	// podID is the pod a check is about (ns/name), and its Message starts
	// with it: the text output summarises checks that differ only in it.
	podID string
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
	g.Checks = append(g.Checks, &check{OK: true, Message: msg, Pod: p, podID: p.Namespace + "/" + p.Name})
}
func (g *checkGroup) failPod(p *podReport, msg, hint string) {
	g.Checks = append(g.Checks, &check{Message: msg, Hint: hint, Pod: p, podID: p.Namespace + "/" + p.Name})
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

// summaryMin is how many pods must share a finding before the text output
// prints it once for all of them (-o json keeps every pod's check).
const summaryMin = 6

// summaryShown is how many of those pods the summary line names.
const summaryShown = 5

// finding is the checks of one group that say the same about different pods.
type finding struct {
	checks []*check
}

// key is a check's message without the pod it is about: checks of
// different pods with the same key are the same finding.
func (c *check) key() string {
	if c.podID == "" {
		return ""
	}
	return fmt.Sprintf("%t\x00%s", c.OK, strings.TrimPrefix(c.Message, c.podID+": "))
}

// findings groups a group's checks by key, in the order each key first
// appears; checks about no pod stay alone.
func (g *checkGroup) findings() []*finding {
	var out []*finding
	byKey := map[string]*finding{}
	for _, c := range g.Checks {
		k := c.key()
		if f := byKey[k]; k != "" && f != nil {
			f.checks = append(f.checks, c)
			continue
		}
		f := &finding{checks: []*check{c}}
		if k != "" {
			byKey[k] = f
		}
		out = append(out, f)
	}
	return out
}

func (r *doctorReport) writeText(w io.Writer) {
	for i, g := range r.Groups {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, g.Name)
		fmt.Fprintln(w, "------------------------------")
		// A finding of a few pods is printed check by check, in place; a
		// big one once, where its first check is.
		big := map[*check]*finding{}
		for _, f := range g.findings() {
			if len(f.checks) >= summaryMin {
				for _, c := range f.checks {
					big[c] = f
				}
			}
		}
		for _, c := range g.Checks {
			f := big[c]
			if f == nil {
				writeCheck(w, c.OK, c.Message, c.Hint)
				continue
			}
			if c != f.checks[0] {
				continue
			}
			// Thousands of pods with one finding (an attack run printed
			// 2,805 lines) hide the one that differs: say it once.
			var ids []string
			for _, o := range f.checks[:summaryShown] {
				ids = append(ids, o.podID)
			}
			msg := fmt.Sprintf("%d pods: %s (first %d: %s, …)", len(f.checks), strings.TrimPrefix(c.Message, c.podID+": "), summaryShown, strings.Join(ids, ", "))
			hint := c.Hint
			for _, o := range f.checks[1:] {
				if o.Hint != c.Hint {
					hint = "for " + c.podID + ", likewise for each: " + c.Hint
					break
				}
			}
			writeCheck(w, c.OK, msg, hint)
		}
	}
	fmt.Fprintln(w)
	if n := r.failed(); n > 0 {
		fmt.Fprintf(w, "Status: %d check(s) failed\n", n)
	} else {
		fmt.Fprintln(w, "Status: all checks passed")
	}
}

func writeCheck(w io.Writer, ok bool, msg, hint string) {
	mark := "✔"
	if !ok {
		mark = "✘"
	}
	fmt.Fprintf(w, "%s %s\n", mark, msg)
	if !ok && hint != "" {
		fmt.Fprintf(w, "    hint: %s\n", hint)
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
