// Package request runs one repository stream through a plugin: its steps in
// their one order (Run), for the gRPC service and for local runs alike.
package request

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/cmp-injector/cmp-injector/cmpserver/engine"
	"github.com/cmp-injector/cmp-injector/cmpserver/pluginpb"
	"github.com/cmp-injector/cmp-injector/cmpserver/tracing"
	"github.com/cmp-injector/cmp-injector/cmpserver/unpack"
)

// Request is one repository stream's run through the plugin, in steps that
// each own their state, called in this order by Run:
//
//	receive   the stream's header, checked by Admit before anything is
//	          written; if Known has the answer, the body only verified and
//	          nothing more done; the request dir, <work dir>/<random UUID>; where to
//	          unpack (the request dir, a lease on a shared tree, or
//	          nowhere); the body, unpacked as it arrives and verified; a
//	          fresh shared tree sealed and published
//	workspace the tree the commands run in, the app dir and the env
//	run       the plugin call, and on a shared tree its seal checked after
//	end       the lease released, the request dir removed, if made (always
//	          called)
type Request struct {
	Engine  *engine.Engine
	Extract bool          // the repository is unpacked (not for a match without discovery)
	Trees   *unpack.Trees // the shared trees of a readOnlyRepository plugin; nil: a private tree
	// NamesOnly unpacks a private tree's files empty (unpack.Target.NamesOnly):
	// the request's fn reads names only (a discovery rule by file name or
	// glob), and the unpacking stops once that rule matches the tree so far
	// (Engine.MatchSettled).
	NamesOnly bool
	Limits    unpack.Limits
	Idle      time.Duration // --stream-idle-timeout; 0: none
	Log       *zap.Logger
	// Remove runs the request dir's removal (the server's: after the
	// response; nil: at once).
	Remove func(func())
	// Admit checks the header before the request writes anything (nil:
	// every request is admitted).
	Admit func(*pluginpb.ManifestRequestMetadata) error
	// Received, when set, is told of the repository once it is received,
	// before the workspace (the server counts and logs it).
	Received func(*unpack.Repo)
	// Known, when set, is asked once the header is admitted whether the
	// answer is already known (the render cache, keyed by the header): if
	// so the body is only received and its checksum verified, nothing is
	// unpacked or run, and Run returns with FromCache set. The caller gives
	// its answer only after Run returned without error, that is after the
	// stream matched the checksum the key was made from.
	Known func(*pluginpb.ManifestRequestMetadata) bool

	// FromCache says Known answered this request.
	FromCache bool

	dir string // receive
	// headerAt is when the stream's header arrived: Argo CD's client sends
	// it only once it has packed the whole repository, so from then on the
	// time is the server's (and the rest of the stream's transfer).
	headerAt time.Time         // receive
	lease    *unpack.Lease     // receive: the shared tree used; nil: the request dir
	repo     *unpack.Repo      // receive
	ws       *engine.Workspace // workspace
}

// Stage is the step of a request that failed.
type Stage string

// Stages, in their order.
const (
	// StageAdmit: Admit refused the header (it logs and counts that itself).
	StageAdmit     Stage = "admit"
	StageReceive   Stage = "receive"
	StageWorkspace Stage = "workspace"
	StageRun       Stage = "run"
)

// Run runs r on stream, calling fn on its workspace: fn returns a fresh
// answer each time it is called, since on a shared tree that was changed
// meanwhile it is called again on a private copy. The Stage says which step
// an error comes from.
func Run[T any](ctx context.Context, r *Request, stream unpack.Stream, fn func(context.Context, *engine.Workspace) (T, error)) (T, Stage, error) {
	var zero T
	defer r.end()
	if refused, err := r.receive(ctx, stream); err != nil {
		if refused {
			return zero, StageAdmit, err
		}
		return zero, StageReceive, err
	}
	if r.Received != nil {
		r.Received(r.repo)
	}
	if r.FromCache {
		return zero, "", nil
	}
	if err := r.workspace(); err != nil {
		return zero, StageWorkspace, err
	}
	out, err := run(ctx, r, fn)
	if err != nil {
		return zero, StageRun, err
	}
	return out, "", nil
}

// SinceHeader is the time since the header arrived: the request's own part,
// without the client's packing before it (0 before the header).
func (r *Request) SinceHeader() time.Duration {
	if r.headerAt.IsZero() {
		return 0
	}
	return time.Since(r.headerAt)
}

// begin creates the request dir.
func (r *Request) begin() error {
	dir, err := r.Engine.NewRequestDir()
	r.dir = dir
	return err
}

// receive reads the stream, unpacking it where target says. A fresh shared
// tree is sealed and shared with later requests once complete (seal.go);
// refused says Admit refused the header. The header's wait and the body are
// spans of ctx's trace (tracing.SpanReceive, tracing.SpanUntgz).
func (r *Request) receive(ctx context.Context, stream unpack.Stream) (refused bool, err error) {
	rc := unpack.NewReceiver(stream, r.Limits, r.Idle)
	_, span := tracing.Begin(ctx, tracing.SpanReceive)
	meta, err := rc.Header()
	span.End(err)
	if err != nil {
		return false, err
	}
	r.headerAt = time.Now()
	if r.Admit != nil {
		err = r.Admit(meta)
		refused = err != nil
	}
	if err == nil && r.Known != nil && r.Known(meta) {
		// Only hashed: the answer's key holds the header's checksum, which
		// the whole stream must match before the answer is given.
		r.FromCache = true
		_, span = tracing.Begin(ctx, tracing.SpanUntgz)
		r.repo, err = rc.Body(meta, nil)
		if span.Recording() && r.repo != nil {
			span.Set(tracing.AttrBytes.Int64(r.repo.Size), tracing.AttrRenderCacheHit.Bool(true))
		}
		span.End(err)
		r.Log = r.Log.With(zap.String("app_rel_path", meta.GetAppRelPath()), zap.Bool("render_cache_hit", true))
		return false, err
	}
	if err == nil {
		err = r.begin()
	}
	if err != nil {
		// The body is read to its end and dropped, never written: a client
		// still sending would otherwise see its stream cut (Argo CD's reports
		// "error sending file: EOF") instead of this answer.
		_, _ = rc.Body(meta, nil)
		return refused, err
	}
	_, span = tracing.Begin(ctx, tracing.SpanUntgz)
	r.repo, err = rc.Body(meta, r.target(meta))
	if span.Recording() && r.repo != nil {
		span.Set(tracing.AttrBytes.Int64(r.repo.Size), tracing.AttrFiles.Int(r.repo.Files))
		if r.NamesOnly {
			span.Set(tracing.AttrNamesOnly.Bool(true), tracing.AttrMatchSettled.Bool(r.repo.Settled))
		}
		if r.Trees != nil {
			span.Set(tracing.AttrSharedTree.Bool(r.lease != nil && !r.lease.Fresh()))
		}
	}
	span.End(err)
	if err != nil {
		return false, err
	}
	r.Log = r.Log.With(zap.String("app_rel_path", meta.GetAppRelPath()))
	if r.Trees != nil {
		r.Log = r.Log.With(zap.Bool("shared_tree_reused", r.lease != nil && !r.lease.Fresh()))
	}
	if r.lease != nil && r.lease.Fresh() {
		if err := r.lease.Publish(r.dir, r.repo.Tgz); err != nil {
			// The tree stays this request's, like a private one.
			r.Log.Warn("the unpacked tree cannot be sealed: not sharing it", zap.Error(err))
		}
	}
	return false, nil
}

// target is where the body is unpacked: nowhere without extraction, the
// request dir for a private tree, nowhere for a shared tree found ready (the
// stream is only hashed), a new dir for a shared tree to unpack.
func (r *Request) target(meta *pluginpb.ManifestRequestMetadata) *unpack.Target {
	if !r.Extract {
		return nil
	}
	if r.Trees == nil {
		to := r.Engine.UnpackTo(r.dir)
		if r.NamesOnly {
			to.NamesOnly, to.Settled = true, r.Engine.MatchSettled(r.dir, meta.GetAppRelPath())
		}
		return to
	}
	key := unpack.TreeKey{Checksum: meta.GetChecksum(), PreserveMode: r.Engine.PreserveMode()}
	l, err := r.Trees.Lease(key, r.Engine.NewRequestDir)
	if err != nil {
		return r.Engine.UnpackTo(r.dir)
	}
	r.lease = l
	if !l.Fresh() {
		return nil
	}
	to := r.Engine.UnpackTo(l.Dir())
	to.ReadOnly, to.Keep = true, true
	return to
}

// workspace resolves the app dir and the commands' env on the request's
// tree: the shared one if leased, else the request dir.
func (r *Request) workspace() error {
	root := r.dir
	if r.lease != nil {
		root = r.lease.Dir()
	}
	ws, err := r.Engine.Workspace(r.dir, root, r.repo, r.Extract)
	r.ws = ws
	return err
}

// run calls fn on the workspace. On a shared tree, the answer counts only if
// the tree was not changed meanwhile (checkShared).
func run[T any](ctx context.Context, r *Request, fn func(context.Context, *engine.Workspace) (T, error)) (T, error) {
	out, err := fn(ctx, r.ws)
	if r.lease != nil && r.lease.Shared() {
		return checkShared(ctx, r, out, err, fn)
	}
	return out, err
}

// checkShared makes sure the answer of a request that ran on the shared tree
// (fn's error err) was made from the tree as unpacked: a command may have
// changed it meanwhile, this request's or a concurrent one's (unpack/seal.go).
// If it was changed, the tree is dropped and fn runs again on a private copy
// unpacked into the request dir from the tree's tarball.
func checkShared[T any](ctx context.Context, r *Request, out T, err error, fn func(context.Context, *engine.Workspace) (T, error)) (T, error) {
	changed := r.lease.Changed()
	if changed == nil {
		return out, err
	}
	var zero T
	r.Log.Warn("the shared repository tree was changed while this request used it (a command wrote into it despite readOnlyRepository): dropping the tree and running again on a private copy",
		zap.NamedError("change", changed))
	if err := r.lease.UnpackCopy(r.Engine.UnpackTo(r.dir)); err != nil {
		return zero, err
	}
	ws, err := r.Engine.Workspace(r.dir, r.dir, r.repo, true)
	if err != nil {
		return zero, err
	}
	return fn(ctx, ws)
}

// end releases the lease and removes the request dir.
func (r *Request) end() {
	if r.lease != nil {
		r.lease.Release()
	}
	dir := r.dir
	if dir == "" {
		return
	}
	remove := func() { r.Engine.Cleanup(dir) }
	if r.Remove == nil {
		remove()
		return
	}
	r.Remove(remove)
}
