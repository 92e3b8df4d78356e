package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/policy"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// policyFieldManager owns the fields the policy command applies.
const policyFieldManager = "cmp-injector"

func policyCmd(ctx context.Context, args []string, stdio serving.IO) error {
	fs := serving.NewFlagSet("cmp-injector policy", "--catalog FILE [--name NAME] [--apply [--watch] [--bindings=false]]")
	catFile := fs.String("catalog", "", "plugin catalog file (required)")
	name := fs.String("name", policy.DefaultName, "name of the policies and their bindings")
	bindings := fs.Bool("bindings", true, "include the two bindings (the chart renders its own and sets this to false)")
	apply := fs.Bool("apply", false, "send the objects to the API server (server-side apply, field manager "+policyFieldManager+") instead of printing them")
	watch := fs.Bool("watch", false, "with --apply: keep running, and apply again whenever the catalog file changes; a catalog that does not load is reported and the policies in place are kept")
	poll := fs.Duration("poll-interval", 5*time.Second, "with --watch: how often the catalog file is checked for changes")
	resync := fs.Duration("resync", time.Minute, "with --watch: apply again this often even when the catalog is unchanged, so a policy deleted or edited by hand is restored")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file for --apply (default: the pod's service account)")
	fs.Notes("Policy mode needs Kubernetes 1.36 or later (MutatingAdmissionPolicy in admissionregistration.k8s.io/v1),\n" +
		"or 1.34-1.35 with the v1beta1 API and its feature gate on. See docs/policy-mode.md for what it does not do.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *catFile == "" {
		return fs.Errorf("--catalog is required")
	}
	if *watch && !*apply {
		return fs.Errorf("--watch needs --apply: it keeps the cluster's policies equal to the catalog")
	}
	if *poll <= 0 || *resync <= 0 {
		return fs.Errorf("--poll-interval and --resync must be positive, got %s and %s", *poll, *resync)
	}
	opts := policy.Options{Name: *name}
	if !*apply {
		cat, err := loadForPolicy(*catFile, stdio)
		if err != nil {
			return err
		}
		return writePolicy(stdio, policy.Render(cat, opts), *bindings)
	}
	rf := reconcileFlags{kubeconfig: *kubeconfig}
	client, err := rf.clientset()
	if err != nil {
		return err
	}
	a := &policyApplier{client: client, opts: opts, bindings: *bindings, stdio: stdio}
	if !*watch {
		cat, err := loadForPolicy(*catFile, stdio)
		if err != nil {
			return err
		}
		return a.apply(ctx, cat)
	}
	ctx, stop := serving.ShutdownContext(ctx)
	defer stop()
	return a.watch(ctx, *catFile, *poll, *resync)
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

func writePolicy(stdio serving.IO, set *policy.Set, bindings bool) error {
	if !bindings {
		set.MutatingBinding, set.ValidatingBinding = nil, nil
	}
	b, err := set.YAML()
	if err != nil {
		return err
	}
	_, err = stdio.Stdout.Write(b)
	return err
}

// policyApplier sends a catalog's policies to the API server.
type policyApplier struct {
	client   kubernetes.Interface
	opts     policy.Options
	bindings bool
	stdio    serving.IO
}

// apply server-side applies the set rendered from cat: the policies first,
// so a binding never names a policy older than the catalog.
func (a *policyApplier) apply(ctx context.Context, cat *catalog.Catalog) error {
	set := policy.Render(cat, a.opts)
	api := a.client.AdmissionregistrationV1()
	force := true
	po := metav1.PatchOptions{FieldManager: policyFieldManager, Force: &force}
	steps := []applyStep{
		{set.Validating, func(n string, b []byte) error {
			_, err := api.ValidatingAdmissionPolicies().Patch(ctx, n, types.ApplyPatchType, b, po)
			return err
		}},
		{set.Mutating, func(n string, b []byte) error {
			_, err := api.MutatingAdmissionPolicies().Patch(ctx, n, types.ApplyPatchType, b, po)
			return err
		}},
	}
	if a.bindings {
		steps = append(steps,
			applyStep{set.ValidatingBinding, func(n string, b []byte) error {
				_, err := api.ValidatingAdmissionPolicyBindings().Patch(ctx, n, types.ApplyPatchType, b, po)
				return err
			}},
			applyStep{set.MutatingBinding, func(n string, b []byte) error {
				_, err := api.MutatingAdmissionPolicyBindings().Patch(ctx, n, types.ApplyPatchType, b, po)
				return err
			}})
	}
	for _, s := range steps {
		body, err := json.Marshal(s.obj)
		if err != nil {
			return err
		}
		kind := s.obj.GetObjectKind().GroupVersionKind().Kind
		name := set.Mutating.Name
		if err := s.patch(name, body); err != nil {
			return fmt.Errorf("apply %s %s: %w%s", kind, name, err, policyHint(err))
		}
	}
	fmt.Fprintf(a.stdio.Stderr, "applied the policies %s for catalog revision %s\n", set.Mutating.Name, cat.Revision)
	return nil
}

// applyStep is one object and the call that applies it.
type applyStep struct {
	obj   runtime.Object
	patch func(name string, body []byte) error
}

// policyHint says what a 404 on the policy API means.
func policyHint(err error) string {
	var status interface{ Status() metav1.Status }
	if errors.As(err, &status) && status.Status().Code == 404 {
		return " (this API server does not serve " + admissionregistrationv1.SchemeGroupVersion.String() +
			" admission policies: policy mode needs Kubernetes 1.36 or later; keep the webhook)"
	}
	return ""
}

// watch applies the catalog now, whenever its file changes and every
// resync, until ctx ends. A catalog that does not load, or an apply that
// fails, is reported and tried again at the next change or poll; the
// policies in place stay.
func (a *policyApplier) watch(ctx context.Context, file string, poll, resync time.Duration) error {
	var applied []byte
	var last time.Time
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		data, err := os.ReadFile(file)
		switch {
		case err != nil:
			fmt.Fprintf(a.stdio.Stderr, "error: catalog %s: %v (the policies in place are kept)\n", file, err)
		case !bytes.Equal(data, applied) || time.Since(last) >= resync:
			cat, err := catalog.Parse(data)
			if err != nil {
				fmt.Fprintf(a.stdio.Stderr, "error: catalog %s: %v (the policies in place are kept)\n", file, err)
				// Reported once per change and resync: a fixed file is a new change.
				applied, last = data, time.Now()
				break
			}
			if err := a.apply(ctx, cat); err != nil {
				fmt.Fprintf(a.stdio.Stderr, "error: %v (tried again in %s)\n", err, poll)
				break
			}
			applied, last = data, time.Now()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
