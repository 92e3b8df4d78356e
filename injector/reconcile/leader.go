package reconcile

import (
	"context"
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Run takes part in the election until ctx ends and reconciles while this
// replica leads. Losing the Lease stops the work at once; the replica then
// stands for election again. Only one replica patches at a time, so two never
// race on a pod or send the same Event twice.
func (r *Reconciler) Run(ctx context.Context) {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: r.opts.LeaseNamespace, Name: r.opts.LeaseName},
		Client:     r.opts.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: r.opts.Identity},
	}
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:          lock,
			LeaseDuration: r.opts.LeaseDuration,
			RenewDeadline: r.opts.RenewDeadline,
			RetryPeriod:   r.opts.RetryPeriod,
			// A replica shutting down hands the Lease over at once instead of
			// letting it expire.
			ReleaseOnCancel: true,
			Name:            r.opts.LeaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: r.lead,
				OnStoppedLeading: func() {},
				OnNewLeader: func(id string) {
					if id != r.opts.Identity {
						r.log.Info("another replica leads the reconciler", zap.String("leader", id))
					}
				},
			},
		})
		if err != nil {
			r.log.Error("leader election cannot start", zap.Error(err))
			return
		}
		le.Run(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(r.opts.RetryPeriod):
		}
	}
}
