package doctor

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// checkReconciler: with the chart's reconciler on, some replica holds its
// Lease and renews it.
func (d *doctor) checkReconciler(ctx context.Context) {
	if d.injector == nil {
		return
	}
	on := false
	name := "cmp-injector-reconciler"
	for _, c := range d.injector.Spec.Template.Spec.Containers {
		for _, a := range c.Args {
			if a == "--reconcile" {
				on = true
			}
			if v, ok := strings.CutPrefix(a, "--leader-election-name="); ok {
				name = v
			}
		}
	}
	g := d.report.group("reconciler")
	if !on {
		g.pass(checkReconcilerLease, "off (reconciler.enabled=false): catalog changes reach pods when they are restarted")
		return
	}
	lease, err := d.client.CoordinationV1().Leases(d.namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		g.fail(checkReconcilerLease, "no replica has taken the Lease "+d.namespace+"/"+name+": nothing keeps pods current",
			"kubectl -n "+d.namespace+" logs -l "+d.selector.String()+" | grep -i lease (RBAC: the chart's Role grants leases get/create/update)")
		return
	}
	if err != nil {
		g.fail(checkReconcilerLease, "Lease "+d.namespace+"/"+name+": "+err.Error(), d.podsHint())
		return
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	dur := 15 * time.Second
	if lease.Spec.LeaseDurationSeconds != nil {
		dur = time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	}
	if holder == "" || lease.Spec.RenewTime == nil || d.now.Sub(lease.Spec.RenewTime.Time) > 2*dur {
		g.fail(checkReconcilerLease, "the Lease "+d.namespace+"/"+name+" is not being renewed (holder "+holder+")", d.podsHint())
		return
	}
	g.pass(checkReconcilerLease, fmt.Sprintf("replica %s leads, Lease renewed %s ago", holder, d.now.Sub(lease.Spec.RenewTime.Time).Round(time.Second)))
}

// podsHint points at the injector's pods by the selector that found them.
func (d *doctor) podsHint() string {
	return "kubectl -n " + d.namespace + " get pods -l " + d.selector.String() + "; their logs say why"
}
