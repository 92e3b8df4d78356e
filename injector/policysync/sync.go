// Package policysync keeps policy mode's admission policies equal to the
// catalog file: it renders them (pkg/policy) and server-side applies them
// when the file changes and at every resync, so a policy deleted or edited by
// hand comes back. A catalog that does not load is reported and counted, and
// the policies in place stay: admission never sees a half-read catalog.
package policysync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/policy"
)

// FieldManager owns the fields the syncer applies.
const FieldManager = "cmp-injector"

// Options configure a Syncer.
type Options struct {
	Client kubernetes.Interface
	// Policy names the objects; Bindings says whether the syncer applies the
	// two bindings too (the chart renders its own).
	Policy   policy.Options
	Bindings bool
	// CatalogFile is read every Poll; the policies are applied again at
	// least every Resync.
	CatalogFile  string
	Poll, Resync time.Duration
	Log          *zap.Logger
	// Registerer takes the syncer's metrics (nil: none).
	Registerer prometheus.Registerer
	// OnApplied is called after each apply with the catalog applied (the
	// reconciler's trigger).
	OnApplied func(*catalog.Catalog)
}

// Syncer applies the policies of a catalog file.
type Syncer struct {
	opts    Options
	metrics *metrics

	mu      sync.Mutex
	current *catalog.Catalog
	// loaded is the watcher's newest valid catalog: until it is current,
	// the policies in place are an older catalog's and Ready says so.
	loaded *catalog.Catalog
	// catalogErr is why the file's newest version is not in use; applyErr
	// why the last apply failed (or that none was made yet).
	catalogErr, applyErr error
}

// New checks o and makes a Syncer.
func New(o Options) (*Syncer, error) {
	if o.Client == nil || o.CatalogFile == "" || o.Poll <= 0 || o.Resync <= 0 || o.Log == nil {
		return nil, errors.New("policysync: Client, CatalogFile, Poll, Resync and Log are required")
	}
	s := &Syncer{opts: o, metrics: newMetrics(), applyErr: errors.New("the policies have not been applied yet")}
	if o.Registerer != nil {
		if err := s.metrics.register(o.Registerer); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Catalog is the catalog last applied (nil before the first apply).
func (s *Syncer) Catalog() *catalog.Catalog {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current
}

// Ready is nil once the policies of the catalog file as it reads now are
// in place; otherwise why not.
func (s *Syncer) Ready() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.catalogErr != nil {
		return s.catalogErr
	}
	if s.applyErr != nil {
		return s.applyErr
	}
	if s.loaded != nil && s.loaded != s.current {
		return fmt.Errorf("catalog revision %q is loaded but its policies are not applied yet", s.loaded.Revision)
	}
	return nil
}

// Run applies now, on every change of the catalog file and every resync,
// until ctx ends. The file is read by catalog.Watcher, as serve reads it: a
// version that does not load is reported once and the last valid one stays,
// so a resync re-applies the policies of the catalog in use. An apply that
// fails is tried again at the next poll.
func (s *Syncer) Run(ctx context.Context) {
	w := catalog.NewWatcher(s.opts.CatalogFile, catalog.Options{}, catalog.Hooks{
		Failed:    func(err error) { s.failed(fmt.Errorf("catalog %s: %w", s.opts.CatalogFile, err), "catalog") },
		Loaded:    s.loadedCatalog,
		Recovered: s.loadedCatalog,
	})
	var applied *catalog.Catalog
	var last time.Time
	tick := time.NewTicker(s.opts.Poll)
	defer tick.Stop()
	for {
		_, _ = w.Reload()
		if cat := w.Current(); cat != nil && (cat != applied || time.Since(last) >= s.opts.Resync) {
			if err := s.Apply(ctx, cat); err != nil {
				s.failed(err, "apply")
			} else {
				applied, last = cat, time.Now()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (s *Syncer) failed(err error, stage string) {
	s.metrics.errors.WithLabelValues(stage).Inc()
	s.opts.Log.Error("the policies in place are kept", zap.String("stage", stage), zap.Error(err))
	if stage == "catalog" {
		s.setErr(&s.catalogErr, err)
	} else {
		s.setErr(&s.applyErr, err)
	}
}

// loadedCatalog records the watcher's newest valid catalog, which ends a
// catalog failure but not readiness: that waits for its apply.
func (s *Syncer) loadedCatalog(c *catalog.Catalog) {
	s.mu.Lock()
	s.catalogErr, s.loaded = nil, c
	s.mu.Unlock()
}

func (s *Syncer) setErr(field *error, err error) {
	s.mu.Lock()
	*field = err
	s.mu.Unlock()
}

// Apply server-side applies the set rendered from cat: the policies first,
// so a binding never names a policy older than the catalog.
func (s *Syncer) Apply(ctx context.Context, cat *catalog.Catalog) error {
	set := policy.Render(cat, s.opts.Policy)
	if !s.opts.Bindings {
		set.MutatingBinding, set.ValidatingBinding = nil, nil
	}
	api := s.opts.Client.AdmissionregistrationV1()
	force := true
	po := metav1.PatchOptions{FieldManager: FieldManager, Force: &force}
	for _, o := range set.Objects() {
		body, err := json.Marshal(o)
		if err != nil {
			return err
		}
		name := set.Mutating.Name
		switch o.(type) {
		case *admissionv1.ValidatingAdmissionPolicy:
			_, err = api.ValidatingAdmissionPolicies().Patch(ctx, name, types.ApplyPatchType, body, po)
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			_, err = api.ValidatingAdmissionPolicyBindings().Patch(ctx, name, types.ApplyPatchType, body, po)
		case *admissionv1.MutatingAdmissionPolicy:
			_, err = api.MutatingAdmissionPolicies().Patch(ctx, name, types.ApplyPatchType, body, po)
		case *admissionv1.MutatingAdmissionPolicyBinding:
			_, err = api.MutatingAdmissionPolicyBindings().Patch(ctx, name, types.ApplyPatchType, body, po)
		}
		if err != nil {
			return fmt.Errorf("apply %s %s: %w%s", kind(o), name, err, hint(err))
		}
	}
	s.metrics.applies.Inc()
	s.metrics.revision.Reset()
	s.metrics.revision.WithLabelValues(cat.Revision).Set(1)
	s.opts.Log.Info("applied the policies", zap.String("name", set.Mutating.Name), zap.String("revision", cat.Revision))
	s.mu.Lock()
	s.current, s.applyErr = cat, nil
	s.mu.Unlock()
	if s.opts.OnApplied != nil {
		s.opts.OnApplied(cat)
	}
	return nil
}

func kind(o runtime.Object) string { return o.GetObjectKind().GroupVersionKind().Kind }

// hint says what a 404 on the policy API means.
func hint(err error) string {
	if apierrors.IsNotFound(err) {
		return " (this API server does not serve " + admissionv1.SchemeGroupVersion.String() +
			" admission policies: policy mode needs Kubernetes 1.36 or later; keep the webhook)"
	}
	return ""
}
