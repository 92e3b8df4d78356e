package cli

import (
	"fmt"
	"sync"

	"go.uber.org/zap"

	"github.com/cmp-injector/cmp-injector/injector/sidecarprobe"
)

// sidecarProbe settles a catalog's defaults.nativeSidecars: auto for serve,
// by a dry run of a pod with a restartPolicy: Always init container in the
// injector's namespace, before the catalog is served. Its client is built on
// first use: a catalog that says true or false needs no API access.
//
// An answer that does not decide (no permission, no API server), after a few
// tries (sidecarprobe.Resolver), is an error,
// and at start-up serve exits with it: native sidecars on an API server
// without them get every injected pod refused, classic ones on a server with
// them lose the sidecars' start order and postStart gate, and neither shows
// until pods start. The injector is then not ready, which stops only the
// opted-in repo-server pods its webhook selects (other pods never reach it):
// the same as an injector that is down, which doctor and the chart's alerts
// report. A later catalog change that needs the dry run and cannot get an
// answer is rejected, keeping the catalog in use, and tried again at the
// next poll.
type sidecarProbe struct {
	rf        *reconcileFlags
	namespace string
	log       *zap.Logger

	mu       sync.Mutex
	resolver *sidecarprobe.Resolver
}

func (p *sidecarProbe) resolve(image string) (bool, string, error) {
	p.mu.Lock()
	if p.resolver == nil {
		r, err := p.newResolver()
		if err != nil {
			p.mu.Unlock()
			return false, "", fmt.Errorf("cannot ask the API server: %w (or set defaults.nativeSidecars to true or false)", err)
		}
		p.resolver = r
	}
	r := p.resolver
	p.mu.Unlock()
	return r.Resolve(image)
}

func (p *sidecarProbe) newResolver() (*sidecarprobe.Resolver, error) {
	client, err := p.rf.clientset()
	if err != nil {
		return nil, err
	}
	ns, err := ownNamespace(p.namespace, "--sidecar-probe-namespace")
	if err != nil {
		return nil, err
	}
	return &sidecarprobe.Resolver{Client: client, Namespace: ns, Decided: func(d sidecarprobe.Decision) {
		p.log.Info("asked the API server about native sidecars", zap.String("namespace", ns), zap.Bool("native", d.Native), zap.String("answer", d.Reason))
	}}, nil
}
