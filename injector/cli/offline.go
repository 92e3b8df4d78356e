package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

func injectCmd(_ context.Context, args []string, io serving.IO) error {
	return offline("inject", args, io)
}

func explainCmd(_ context.Context, args []string, io serving.IO) error {
	return offline("explain", args, io)
}

// offline is inject and explain: the webhook's decision on YAML documents.
func offline(name string, args []string, stdio serving.IO) error {
	fs := serving.NewFlagSet("cmp-injector "+name, "--catalog FILE [-f FILE] [--namespace NS]")
	catFile := fs.String("catalog", "", "plugin catalog file (required)")
	in := fs.String("f", "-", "input YAML file, - for stdin")
	ns := fs.String("namespace", "", "namespace to decide for (default: each object's metadata.namespace, else \"default\")")
	fs.Notes("Pods, Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs, CronJobs and Lists of them are decided;\n" +
		"other objects pass through. inject keeps the order and comments of what it changes.\n" +
		"Exit codes: 0 every object injected, skipped or passed through; 1 an object is denied\n" +
		"(inject then writes nothing) or the input is bad; 2 usage error.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *catFile == "" {
		return fs.Errorf("--catalog is required")
	}
	cat, err := catalog.Load(*catFile)
	if err != nil {
		return fmt.Errorf("catalog %s: %w", *catFile, err)
	}
	for _, w := range cat.Warnings {
		fmt.Fprintf(stdio.Stderr, "warning: catalog %s: %s\n", *catFile, w)
	}
	if cat.Defaults.NativeSidecarsAuto {
		// Offline there is no API server to ask: the reason says so.
		fmt.Fprintf(stdio.Stderr, "note: catalog %s: %s\n", *catFile, cat.Defaults.NativeSidecarsReason)
	}
	data, err := readInput(name, *in, stdio.Stdin)
	if err != nil {
		return err
	}
	objs, err := inject.IntoResources(bytes.NewReader(data), cat, *ns)
	if err != nil {
		return err
	}
	if name == "explain" {
		if err := explain(stdio.Stdout, objs, cat); err != nil {
			return err
		}
		// The same exit code as inject, so a pipeline can gate on explain.
		if n := inject.DeniedCount(objs); n > 0 {
			return fmt.Errorf("%d of %d objects would be denied", n, len(inject.Flatten(objs)))
		}
		return nil
	}
	// Nothing is written when any object is denied: half an output would be
	// applied by a pipeline that does not check the exit code.
	if err := inject.Denials(objs); err != nil {
		return err
	}
	return writeObjects(stdio.Stdout, objs)
}

// writeObjects writes the outputs as one YAML stream.
func writeObjects(w io.Writer, objs []*inject.Object) error {
	for i, o := range objs {
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		out := o.Output
		if len(out) > 0 && out[len(out)-1] != '\n' {
			out = append(out, '\n')
		}
		if _, err := w.Write(out); err != nil {
			return err
		}
	}
	return nil
}

// explain writes, per object, whether it would be injected, denied or skipped
// and why; it reads the Report and decides nothing again. For an injected
// plugin limited to some Argo CD projects or repositories, it says which
// (the catalog's rules, which the sidecar applies).
func explain(w io.Writer, objs []*inject.Object, cat *catalog.Catalog) error {
	for _, o := range inject.Flatten(objs) {
		if o.Report == nil {
			if _, err := fmt.Fprintf(w, "%s: no pod template, passed through\n", o.ID()); err != nil {
				return err
			}
			continue
		}
		r := o.Report
		what := r.Message()
		if r.Decision == inject.Denied {
			what = string(r.Decision) // the problems follow, one a line
		}
		fmt.Fprintf(w, "%s: %s [%s]\n", o.ID(), what, reasonList(r.Reasons))
		for _, h := range o.Hints {
			fmt.Fprintf(w, "  hint: %s\n", h)
		}
		for _, warning := range r.Warnings {
			fmt.Fprintf(w, "  warning: %s\n", warning)
		}
		switch r.Decision {
		case inject.Injected:
			fmt.Fprintf(w, "  plugins: %s\n  init containers: %s\n  containers: %s\n  volumes: %s\n  catalog revision: %s\n",
				strings.Join(r.Status.Plugins, ", "), strings.Join(r.Status.InitContainers, ", "),
				noneIfEmpty(r.Status.Containers), strings.Join(r.Status.Volumes, ", "), r.Status.Revision)
			if r.Server != nil {
				fmt.Fprintf(w, "  plugin server: %s [%s]\n", r.Server.Describe(), r.Server.Source)
			}
			for _, p := range r.Status.Plugins {
				if e := cat.Plugins[p]; e != nil && e.Rules.IsSet() {
					fmt.Fprintf(w, "  plugin %s serves %s\n", p, e.Rules.Describe())
				}
			}
		case inject.Denied:
			for _, p := range r.Problems {
				fmt.Fprintf(w, "  - %s: %s\n", p.Reason, p.Message)
			}
		}
	}
	return nil
}

func reasonList(rs []inject.Reason) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

func noneIfEmpty(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, ", ")
}
