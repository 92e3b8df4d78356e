package doctor

import (
	"fmt"
	"io"
	"strings"

	"github.com/cmp-injector/cmp-injector/pkg/inject"
)

// Report is what doctor found, grouped by what an admin checks in turn: can
// I reach the cluster, is the webhook wired, is its certificate good, does
// the catalog load, which namespaces and pods are in, does the reconciler
// run. It is -o json as it stands.
type Report struct {
	// OK: no check of severity error failed.
	OK     bool     `json:"ok"`
	Groups []*Group `json:"groups"`
	// SkippedPods counts, per namespace, the labelled pods in namespaces
	// the webhook does not select: doctor does not check them.
	SkippedPods map[string]int `json:"skippedPods,omitempty"`
}

// Group is the results of one part of the installation.
type Group struct {
	Name   string    `json:"name"`
	Checks []*Result `json:"checks"`
}

// Result is one outcome of a Check.
type Result struct {
	// ID, Severity and Retryable are the Check's.
	ID        string   `json:"id"`
	Severity  Severity `json:"severity"`
	Retryable bool     `json:"retryable"`
	OK        bool     `json:"ok"`
	Message   string   `json:"message"`
	// Hint says what to do about a failed check.
	Hint string     `json:"hint,omitempty"`
	Pod  *PodReport `json:"pod,omitempty"`
	// podID is the pod a result is about (ns/name), and its Message starts
	// with it: the text output summarises results that differ only in it.
	podID string
}

// PodReport is one repo-server pod's state, for -o json.
type PodReport struct {
	Namespace string              `json:"namespace"`
	Name      string              `json:"name"`
	Injected  bool                `json:"injected"`
	Plugins   []string            `json:"plugins,omitempty"`
	Revision  string              `json:"revision,omitempty"`
	Current   bool                `json:"current"`
	Stale     []inject.Difference `json:"stale,omitempty"`
	Pending   []string            `json:"pendingConfig,omitempty"`
	Restarts  map[string]int32    `json:"sidecarRestarts,omitempty"`
}

// group returns the group called name, made on first use.
func (r *Report) group(name string) *Group {
	for _, g := range r.Groups {
		if g.Name == name {
			return g
		}
	}
	g := &Group{Name: name}
	r.Groups = append(r.Groups, g)
	return g
}

func (g *Group) add(c Check, ok bool, msg, hint string, p *PodReport, podID string) {
	if !ok && hint == "" {
		hint = c.Hint
	}
	g.Checks = append(g.Checks, &Result{ID: c.ID, Severity: c.Severity, Retryable: c.Retryable, OK: ok, Message: msg, Hint: hint, Pod: p, podID: podID})
}

func (g *Group) pass(c Check, msg string) { g.add(c, true, msg, "", nil, "") }

// fail records a failed check; hint "" takes the check's own.
func (g *Group) fail(c Check, msg, hint string) { g.add(c, false, msg, hint, nil, "") }

func (g *Group) passPod(c Check, p *PodReport, msg string) {
	g.add(c, true, msg, "", p, p.Namespace+"/"+p.Name)
}

func (g *Group) failPod(c Check, p *PodReport, msg, hint string) {
	g.add(c, false, msg, hint, p, p.Namespace+"/"+p.Name)
}

// counts are the failed results by severity.
func (r *Report) counts() (errors, warnings int) {
	for _, g := range r.Groups {
		for _, c := range g.Checks {
			switch {
			case c.OK:
			case c.Severity == Warning:
				warnings++
			default:
				errors++
			}
		}
	}
	return errors, warnings
}

// retryable reports whether the report failed only in ways that may clear
// by themselves: some error failed and every failed error is retryable.
func (r *Report) retryable() bool {
	failed := false
	for _, g := range r.Groups {
		for _, c := range g.Checks {
			if c.OK || c.Severity == Warning {
				continue
			}
			if !c.Retryable {
				return false
			}
			failed = true
		}
	}
	return failed
}

// summaryMin is how many pods must share a finding before the text output
// prints it once for all of them (-o json keeps every pod's result).
const summaryMin = 6

// summaryShown is how many of those pods the summary line names.
const summaryShown = 5

// finding is the results of one group that say the same about different
// pods.
type finding struct {
	results []*Result
}

// key is a result's check and message without the pod it is about: results
// of different pods with the same key are the same finding.
func (c *Result) key() string {
	if c.podID == "" {
		return ""
	}
	return fmt.Sprintf("%s\x00%t\x00%s", c.ID, c.OK, strings.TrimPrefix(c.Message, c.podID+": "))
}

// findings groups a group's results by key, in the order each key first
// appears; results about no pod stay alone.
func (g *Group) findings() []*finding {
	var out []*finding
	byKey := map[string]*finding{}
	for _, c := range g.Checks {
		k := c.key()
		if f := byKey[k]; k != "" && f != nil {
			f.results = append(f.results, c)
			continue
		}
		f := &finding{results: []*Result{c}}
		if k != "" {
			byKey[k] = f
		}
		out = append(out, f)
	}
	return out
}

// WriteText writes the report for a person: one line per result (✔ passed,
// ✘ error, ‼ warning) with the hint under a failure, a finding shared by many
// pods once, and a status line.
func (r *Report) WriteText(w io.Writer) {
	for i, g := range r.Groups {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, g.Name)
		fmt.Fprintln(w, "------------------------------")
		// A finding of a few pods is printed result by result, in place; a
		// big one once, where its first result is.
		big := map[*Result]*finding{}
		for _, f := range g.findings() {
			if len(f.results) >= summaryMin {
				for _, c := range f.results {
					big[c] = f
				}
			}
		}
		for _, c := range g.Checks {
			f := big[c]
			if f == nil {
				writeResult(w, c, c.Message, c.Hint)
				continue
			}
			if c != f.results[0] {
				continue
			}
			// Thousands of pods with one finding (an attack run printed
			// 2,805 lines) hide the one that differs: say it once.
			var ids []string
			for _, o := range f.results[:summaryShown] {
				ids = append(ids, o.podID)
			}
			msg := fmt.Sprintf("%d pods: %s (first %d: %s, …)", len(f.results), strings.TrimPrefix(c.Message, c.podID+": "), summaryShown, strings.Join(ids, ", "))
			hint := c.Hint
			for _, o := range f.results[1:] {
				if o.Hint != c.Hint {
					hint = "for " + c.podID + ", likewise for each: " + c.Hint
					break
				}
			}
			writeResult(w, c, msg, hint)
		}
	}
	fmt.Fprintln(w)
	errs, warns := r.counts()
	status := "all checks passed"
	if errs > 0 {
		status = fmt.Sprintf("%d check(s) failed", errs)
	}
	if warns > 0 {
		status += fmt.Sprintf(", %d warning(s)", warns)
	}
	fmt.Fprintln(w, "Status: "+status)
}

func writeResult(w io.Writer, c *Result, msg, hint string) {
	mark := "✔"
	switch {
	case c.OK:
	case c.Severity == Warning:
		mark = "‼"
	default:
		mark = "✘"
	}
	fmt.Fprintf(w, "%s %s\n", mark, msg)
	if !c.OK && hint != "" {
		fmt.Fprintf(w, "    hint: %s\n", hint)
	}
}
