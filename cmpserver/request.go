package cmpserver

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/cmp-injector/cmp-injector/cmpserver/engine"
	"github.com/cmp-injector/cmp-injector/cmpserver/pluginpb"
	"github.com/cmp-injector/cmp-injector/cmpserver/unpack"
)

// request runs one repository stream through the plugin, in steps that each
// own their state, called in this order by the gRPC service (Server.withRepo)
// and by local runs (runLocal):
//
//	begin     the request dir, <work dir>/<random UUID> (receive calls it
//	          once the header is admitted, if the caller did not)
//	receive   the stream's header, checked by admit (tenancy.go) before
//	          anything is written; where to unpack (the request dir, a lease
//	          on a shared tree, or nowhere); the body, unpacked as it arrives
//	          and verified; a fresh shared tree sealed and published
//	workspace the tree the commands run in, the app dir and the env
//	run       the plugin call, and on a shared tree its seal checked after
//	end       the lease released, the request dir removed, if made (always
//	          called)
type request struct {
	eng     *engine.Engine
	extract bool          // the repository is unpacked (not for a match without discovery)
	trees   *unpack.Trees // the shared trees of a readOnlyRepository plugin; nil: a private tree
	limits  unpack.Limits
	idle    time.Duration // --stream-idle-timeout; 0: none
	log     *zap.Logger
	// remove runs the request dir's removal (Server.removals: after the
	// response).
	remove func(func())
	// admit checks the header before the request writes anything (nil:
	// every request is admitted); refused is set when it said no.
	admit   func(*pluginpb.ManifestRequestMetadata) error
	refused bool

	dir string // begin
	// headerAt is when the stream's header arrived: Argo CD's client sends
	// it only once it has packed the whole repository, so from then on the
	// time is the server's (and the rest of the stream's transfer).
	headerAt time.Time         // receive
	lease    *unpack.Lease     // receive: the shared tree used; nil: the request dir
	repo     *unpack.Repo      // receive
	ws       *engine.Workspace // workspace
}

// sinceHeader is the time since the header arrived: the request's own part,
// without the client's packing before it (0 before the header).
func (r *request) sinceHeader() time.Duration {
	if r.headerAt.IsZero() {
		return 0
	}
	return time.Since(r.headerAt)
}

// begin creates the request dir.
func (r *request) begin() error {
	dir, err := r.eng.NewRequestDir()
	r.dir = dir
	return err
}

// receive reads the stream, unpacking it where target says. A fresh shared
// tree is sealed and shared with later requests once complete (seal.go).
func (r *request) receive(stream unpack.Stream) error {
	rc := unpack.NewReceiver(stream, r.limits, r.idle)
	meta, err := rc.Header()
	if err != nil {
		return err
	}
	r.headerAt = time.Now()
	if err := r.prepare(meta); err != nil {
		// The body is read to its end and dropped, never written: a client
		// still sending would otherwise see its stream cut (Argo CD's reports
		// "error sending file: EOF") instead of this answer.
		_, _ = rc.Body(meta, nil)
		return err
	}
	if r.repo, err = rc.Body(meta, r.target(meta)); err != nil {
		return err
	}
	r.log = r.log.With(zap.String("app_rel_path", meta.GetAppRelPath()))
	if r.trees != nil {
		r.log = r.log.With(zap.Bool("shared_tree_reused", r.lease != nil && !r.lease.Fresh()))
	}
	if r.lease != nil && r.lease.Fresh() {
		if err := r.lease.Publish(r.dir, r.repo.Tgz); err != nil {
			// The tree stays this request's, like a private one.
			r.log.Warn("the unpacked tree cannot be sealed: not sharing it", zap.Error(err))
		}
	}
	return nil
}

// prepare is what comes between the header and the body: the admission
// check, then the request dir.
func (r *request) prepare(meta *pluginpb.ManifestRequestMetadata) error {
	if r.admit != nil {
		if err := r.admit(meta); err != nil {
			r.refused = true
			return err
		}
	}
	if r.dir == "" {
		return r.begin()
	}
	return nil
}

// target is where the body is unpacked: nowhere without extraction, the
// request dir for a private tree, nowhere for a shared tree found ready (the
// stream is only hashed), a new dir for a shared tree to unpack.
func (r *request) target(meta *pluginpb.ManifestRequestMetadata) *unpack.Target {
	if !r.extract {
		return nil
	}
	if r.trees == nil {
		return r.eng.UnpackTo(r.dir)
	}
	key := unpack.TreeKey{Checksum: meta.GetChecksum(), PreserveMode: r.eng.PreserveMode()}
	l, err := r.trees.Lease(key, r.eng.NewRequestDir)
	if err != nil {
		return r.eng.UnpackTo(r.dir)
	}
	r.lease = l
	if !l.Fresh() {
		return nil
	}
	to := r.eng.UnpackTo(l.Dir())
	to.ReadOnly, to.Keep = true, true
	return to
}

// workspace resolves the app dir and the commands' env on the request's
// tree: the shared one if leased, else the request dir.
func (r *request) workspace() (*engine.Workspace, error) {
	root := r.dir
	if r.lease != nil {
		root = r.lease.Dir()
	}
	ws, err := r.eng.Workspace(r.dir, root, r.repo, r.extract)
	r.ws = ws
	return ws, err
}

// run calls fn on the workspace. On a shared tree, the answer counts only if
// the tree was not changed meanwhile (checkShared).
func (r *request) run(ctx context.Context, fn func(context.Context, *engine.Workspace) error) error {
	err := fn(ctx, r.ws)
	if r.lease != nil && r.lease.Shared() {
		err = r.checkShared(ctx, err, fn)
	}
	return err
}

// checkShared makes sure the answer of a request that ran on the shared tree
// (fn's error err) was made from the tree as unpacked: a command may have
// changed it meanwhile, this request's or a concurrent one's (unpack/seal.go).
// If it was changed, the tree is dropped and fn runs again on a private copy
// unpacked into the request dir from the tree's tarball.
func (r *request) checkShared(ctx context.Context, err error, fn func(context.Context, *engine.Workspace) error) error {
	changed := r.lease.Changed()
	if changed == nil {
		return err
	}
	r.log.Warn("the shared repository tree was changed while this request used it (a command wrote into it despite readOnlyRepository): dropping the tree and running again on a private copy",
		zap.NamedError("change", changed))
	if err := r.lease.UnpackCopy(r.eng.UnpackTo(r.dir)); err != nil {
		return err
	}
	ws, err := r.eng.Workspace(r.dir, r.dir, r.repo, true)
	if err != nil {
		return err
	}
	return fn(ctx, ws)
}

// end releases the lease and removes the request dir.
func (r *request) end() {
	if r.lease != nil {
		r.lease.Release()
	}
	dir := r.dir
	if dir == "" {
		return
	}
	r.remove(func() { r.eng.Cleanup(dir) })
}
