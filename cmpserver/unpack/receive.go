package unpack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cmp-injector/cmp-injector/cmpserver/pluginpb"
	"github.com/cmp-injector/cmp-injector/cmpserver/unlinked"
)

// Stream is the receiving side of the three client-streaming RPCs.
type Stream interface {
	Context() context.Context
	Recv() (*pluginpb.AppStreamRequest, error)
}

// Repo is a repository stream read to its end whose checksum matched,
// unpacked into the request dir when that was asked for.
type Repo struct {
	Meta *pluginpb.ManifestRequestMetadata
	Size int64 // compressed bytes received
	// Files is the number of tar entries unpacked (0 when the stream was only
	// read: a match without discovery, or a shared tree found ready).
	Files int
	// Settled: Target.Settled stopped the extraction before the tarball's
	// end; the rest of the stream was received and verified, not unpacked.
	Settled bool
	// Tgz is the received tarball (Size bytes, unlinked) when Target.Keep
	// asked for it; the caller closes it.
	Tgz *os.File
}

// Target says where and how Receiver.Body unpacks the tarball; nil: only read
// and verify the stream (MatchRepository without discovery).
type Target struct {
	Dir          string // the request dir, root of the unpacked tree
	SpoolDir     string // where the received tarball is spooled, outside Dir
	Limits       Limits
	PreserveMode bool
	ReadOnly     bool // see extractOptions.readOnly
	// NamesOnly unpacks every file empty (extractOptions.namesOnly): for a
	// MatchRepository whose rule reads only names, so that discovery writes
	// no content. Never for a tree a command runs on.
	NamesOnly bool
	// Settled, with NamesOnly, is asked after each file or directory is
	// unpacked (rel: its path in Dir) whether the tree so far already gives
	// the answer, so that the rest need not be unpacked (a discovery rule
	// that has matched: engine.MatchSettled). It is asked only while the
	// tree holds no symlink: entries only add names to a tree without links
	// (a later duplicate replaces a file, never removes a name), so what
	// has matched still matches once the whole tarball would be unpacked;
	// with a link, a later entry can re-point it. The stream is still read
	// to its end and its checksum verified.
	Settled func(rel string) bool
	// Keep hands the spooled tarball to the caller (Repo.Tgz) instead of
	// closing it: a shared tree keeps it (trees.go).
	Keep bool
}

// A repository stream is read in two phases, header then body, so that the
// caller decides where to unpack from the header (package request) before the body
// arrives. The body is spooled and unpacked while it arrives, so that
// unpacking overlaps the transfer instead of following it (Argo CD's server
// writes the whole tarball to a file first and unpacks it afterwards). The
// tree is unpacked into to.Dir, e.g. the request dir, which nothing uses until
// body has returned, that is until the checksum of the whole stream has
// matched; on any error the caller removes the dir. Every extraction limit is
// checked before the bytes it bounds are written, and what looks like a gzip
// bomb waits for the whole stream (see bombRatio). A stream that sends nothing
// for idle (> 0) is ended. The error strings of Argo CD's server are kept where
// they exist, since users search for them.

// NewReceiver reads stream with limits, ending it after idle (> 0) without
// a message.
func NewReceiver(stream Stream, limits Limits, idle time.Duration) *Receiver {
	r := &Receiver{stream: stream, limits: limits, idle: idle}
	if idle > 0 {
		r.watched = true
		r.lastMsg.Store(time.Now().UnixNano())
	}
	return r
}

// Receiver reads one repository stream (header, body). With an idle bound, each phase runs
// on its own goroutine and the handler only watches it (watch): gRPC
// cannot interrupt a server-side Recv (its context only ends with the client,
// the client's deadline or the handler), and returning from the handler
// cancels the stream, which ends that Recv and the goroutine with it. The
// goroutine hashes and spools each chunk itself: handing every message to
// the handler cost two goroutine switches per 1 KiB chunk.
type Receiver struct {
	stream Stream
	limits Limits
	idle   time.Duration
	// watched is set with an idle bound: the watcher (watch) reads lastMsg,
	// when the last message arrived (unix nanoseconds), kept only then.
	watched bool
	lastMsg atomic.Int64
	// sent is set once the client has sent its whole stream (Recv's EOF):
	// from then on nothing is waited for from it.
	sent atomic.Bool
	// mu orders the start of the extraction with the watcher giving up:
	// once abandoned, nothing is unpacked (into a tree the caller may have
	// released); un, once started, is stopped by the watcher on idle.
	mu        sync.Mutex
	un        *streamUnpack
	abandoned bool
}

var errAbandoned = errors.New("the request ended while the stream was read")

// errTgz heads what goes wrong while the tarball is received, as in Argo CD's
// receiveFile; the caller puts the RPC's own words before it
// (ErrorPrefix).
const errTgz = "error receiving tgz file"

// unpackError words a failed extraction as Argo CD's Untgz failure, which
// here happens while the stream is received. Limits and refusals of ours
// follow Argo CD's words. errAbandoned is not an unpack failure.
func unpackError(err error) error {
	if errors.Is(err, errAbandoned) {
		return err
	}
	return fmt.Errorf("error decompressing tgz file: %w", err)
}

// ErrorPrefix is the words Argo CD's handler puts before an error of
// the stream (its ReceiveRepoStream), by RPC.
func ErrorPrefix(rpc string) string {
	switch rpc {
	case "GenerateManifest":
		return "generate manifest error receiving stream"
	case "MatchRepository":
		return "match repository error receiving stream"
	case "GetParametersAnnouncement":
		return "parameters announcement error receiving stream"
	}
	return "error receiving stream"
}

// Header reads the stream's first message, its metadata.
func (r *Receiver) Header() (*pluginpb.ManifestRequestMetadata, error) {
	if err := r.stream.Context().Err(); err != nil {
		return nil, fmt.Errorf("stream context error: %w", err)
	}
	repo, err := r.watch(func() (*Repo, error) {
		first, err := r.recv()
		if err != nil {
			return nil, fmt.Errorf("error receiving stream header: %w", err)
		}
		meta := first.GetMetadata()
		if meta == nil {
			return nil, errors.New("error getting stream metadata: metadata is nil")
		}
		return &Repo{Meta: meta}, nil
	})
	if err != nil {
		return nil, err
	}
	return repo.Meta, nil
}

// Body reads the tarball that follows meta to the end of the stream and
// checks its checksum, unpacking it as it arrives as to says (nil: only read
// and verify).
func (r *Receiver) Body(meta *pluginpb.ManifestRequestMetadata, to *Target) (*Repo, error) {
	return r.watch(func() (*Repo, error) { return r.readBody(meta, to) })
}

func (r *Receiver) readBody(meta *pluginpb.ManifestRequestMetadata, to *Target) (*Repo, error) {
	ctx := r.stream.Context()
	hash := sha256.New()
	un, err := r.startUnpack(to)
	if err != nil {
		return nil, err
	}
	if un != nil {
		// On every return: stop the extraction and wait for it, so nothing
		// writes into the request dir once the caller removes it.
		defer un.stop()
	}
	maxCompressed := r.limits.MaxCompressedBytes
	var size int64
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("%s: stream context error: %w", errTgz, err)
		}
		msg, err := r.recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: stream Recv error: %w", errTgz, err)
		}
		file := msg.GetFile()
		if file == nil {
			return nil, fmt.Errorf("%s: stream request file is nil", errTgz)
		}
		size += int64(len(file.Chunk))
		if maxCompressed > 0 && size > maxCompressed {
			return nil, fmt.Errorf("%s: repository tarball exceeds %d compressed bytes (limit --max-compressed-bytes)", errTgz, maxCompressed)
		}
		hash.Write(file.Chunk)
		if un != nil {
			if err := un.feed(file.Chunk); err != nil {
				return nil, unpackError(err)
			}
		}
	}
	if got := hex.EncodeToString(hash.Sum(nil)); got != meta.GetChecksum() {
		return nil, fmt.Errorf("%s: file checksum validation error", errTgz)
	}
	repo := &Repo{Meta: meta, Size: size}
	if un != nil {
		if err := un.finish(); err != nil {
			return nil, unpackError(err)
		}
		repo.Files, repo.Settled = un.stats.files, un.stats.settled
		repo.Tgz = r.keepSpool(un)
	}
	return repo, nil
}

// keepSpool takes the spooled tarball from un when its caller asked for it,
// unless the watcher has given up on the request (it then closes it).
func (r *Receiver) keepSpool(un *streamUnpack) *os.File {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !un.keep || r.abandoned {
		return nil
	}
	un.kept = true
	return un.sp.f
}

// startUnpack starts the extraction to asks for, unless the watcher has
// given up on the request.
func (r *Receiver) startUnpack(to *Target) (*streamUnpack, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.abandoned {
		return nil, errAbandoned
	}
	if to == nil {
		return nil, nil
	}
	un, err := startUnpack(to)
	r.un = un
	return un, err
}

func (r *Receiver) recv() (*pluginpb.AppStreamRequest, error) {
	msg, err := r.stream.Recv()
	if r.watched {
		r.lastMsg.Store(time.Now().UnixNano())
		if errors.Is(err, io.EOF) {
			r.sent.Store(true)
		}
	}
	return msg, err
}

type receiveResult struct {
	repo *Repo
	err  error
}

// watch runs a phase of the stream, with an idle bound on its own goroutine,
// ending the request when no message has arrived for idle. The extraction is
// stopped before it returns, as readBody itself does, so nothing writes into
// the request dir once the caller removes it; the goroutine ends when the
// handler returns.
func (r *Receiver) watch(phase func() (*Repo, error)) (*Repo, error) {
	if !r.watched {
		return phase()
	}
	idle := r.idle
	done := make(chan receiveResult, 1)
	go func() {
		repo, err := phase()
		done <- receiveResult{repo, err}
	}()
	timer := time.NewTimer(idle)
	defer timer.Stop()
	for {
		select {
		case res := <-done:
			return res.repo, res.err
		case <-timer.C:
			if r.sent.Load() {
				// The client has sent everything: what is still running is
				// the extraction, bounded by the limits (and links.go's
				// budget), whose own error or success is the answer. Calling
				// it a client that stopped sending would hide it.
				res := <-done
				return res.repo, res.err
			}
			if quiet := time.Since(time.Unix(0, r.lastMsg.Load())); quiet < idle {
				timer.Reset(idle - quiet)
				continue
			}
			r.mu.Lock()
			r.abandoned = true
			un := r.un
			r.mu.Unlock()
			if un != nil {
				un.stop()
			}
			go func() {
				// The stream may have completed just now: a tarball it
				// kept for the caller is nobody's.
				if res := <-done; res.repo != nil && res.repo.Tgz != nil {
					res.repo.Tgz.Close()
				}
			}()
			return nil, idleStatus{status.Newf(codes.DeadlineExceeded,
				"no message on the stream for %s: the client stopped sending (limit --stream-idle-timeout)", idle)}
		}
	}
}

// A gzip bomb is a small stream that expands to files over --max-extracted-bytes.
// Unpacking as the stream arrives would write those files up to the limit (4 GiB
// by default) before the limit trips, so before writing a file the extraction
// checks that the declared sizes so far are at most bombRatio times the
// compressed bytes received plus bombSlack. Repositories stay far below (text
// compresses 4-10 times, git packs not at all); when a file would exceed it, the
// extraction waits for more of the stream, and if the whole stream has arrived
// and it still exceeds it, every header is checked against the limits before the
// file is written. A bomb is so refused with at most bombRatio × its size +
// bombSlack written, and a legitimate repository with large, very compressible
// files is only unpacked later, never refused.
const (
	bombRatio = 64
	bombSlack = 4 << 20
)

// streamUnpack runs extractTgz in its own goroutine on the spooled stream, so
// that receiving and hashing (the receiving goroutine) and decompressing and
// writing files (this one) use both cores.
type streamUnpack struct {
	sp     *tgzSpool
	limits Limits
	done   chan struct{}
	err    error // set before done is closed
	// checked is set once every header of the complete stream passed the limits.
	checked bool
	// keep: see Target.Keep; kept: the caller took the spool's file.
	keep, kept bool
	// stats are the extraction's counts, read once done is closed.
	stats extractStats
}

func startUnpack(to *Target) (*streamUnpack, error) {
	sp, err := newTgzSpool(to.SpoolDir)
	if err != nil {
		return nil, err
	}
	u := &streamUnpack{sp: sp, limits: to.Limits, done: make(chan struct{}), keep: to.Keep}
	go func() {
		defer close(u.done)
		u.err = extractTgzWith(&tgzReader{sp: sp}, to.Dir, extractOptions{limits: to.Limits, preserveMode: to.PreserveMode, readOnly: to.ReadOnly, namesOnly: to.NamesOnly, settled: to.Settled, gate: u.gate, stats: &u.stats})
	}()
	return u, nil
}

// gate is called before a file is written with the declared size of all files
// so far, that one included (see bombRatio).
func (u *streamUnpack) gate(total int64) error {
	if u.checked || total <= bombSlack {
		return nil
	}
	complete, err := u.sp.waitReceived(func(received int64) bool { return total <= bombRatio*received+bombSlack })
	if err != nil || !complete {
		return err
	}
	if err := checkTgzLimits(io.NewSectionReader(u.sp.f, 0, u.sp.length()), u.limits); err != nil {
		return err
	}
	u.checked = true
	return nil
}

// feed spools the next chunk. It fails early with a limit error the extraction
// found; any other extraction error waits for the end of the stream, so that a
// wrong checksum is reported first, as by Argo CD (which verifies, then unpacks).
func (u *streamUnpack) feed(chunk []byte) error {
	select {
	case <-u.done:
		// The extraction has ended (the tar may end before the gzip stream
		// does, or Target.Settled ended it): the rest is only hashed.
		if isLimit(u.err) {
			return u.err
		}
		return nil
	default:
	}
	if err := u.sp.write(chunk); err != nil {
		return fmt.Errorf("error writing repository tarball: %w", err)
	}
	return nil
}

// finish marks the stream complete and returns the extraction's result.
func (u *streamUnpack) finish() error {
	if err := u.sp.complete(); err != nil {
		return fmt.Errorf("error writing repository tarball: %w", err)
	}
	<-u.done
	return u.err
}

// stop ends the extraction (it fails reading an aborted spool if the stream was
// not complete), waits for it and closes the spool unless the caller took it.
func (u *streamUnpack) stop() {
	u.sp.abort()
	<-u.done
	if !u.kept {
		u.sp.f.Close()
	}
}

// tgzSpool holds the received tarball in an unlinked temp file that the extraction
// reads behind the Receiver, like `tail -f`: memory stays flat whatever the chunk
// size, and the Receiver never waits for the extraction (the stream is bounded
// by --max-compressed-bytes, as the temp file Argo CD's server writes).
type tgzSpool struct {
	f        *os.File
	buf      []byte // received, not yet written to f
	mu       sync.Mutex
	cond     sync.Cond
	written  int64 // bytes in f, readable
	received int64 // written + len(buf)
	done     bool  // the stream is complete and all of it is in f
	aborted  bool
}

// spoolFlush is the write size of gathered chunks: 1 KiB chunks (the
// repo-server's default) cost the file one syscall per 64 KiB. A chunk of at
// least spoolGather bytes (the injector's are 32,000) is written as it came
// when nothing is gathered, and such a stream never holds a gathering buffer:
// under the application controller's 20 concurrent refreshes every buffer a
// stream holds is held 20 times.
const (
	spoolFlush  = 64 << 10
	spoolGather = 4 << 10
)

var errSpoolAborted = errors.New("stream ended before the tarball was complete")

func newTgzSpool(dir string) (*tgzSpool, error) {
	f, err := unlinked.Create(dir, "tgz-")
	if err != nil {
		return nil, fmt.Errorf("error creating temp file: %w", err)
	}
	s := &tgzSpool{f: f}
	s.cond.L = &s.mu
	return s, nil
}

func (s *tgzSpool) write(chunk []byte) error {
	if len(s.buf) == 0 && len(chunk) >= spoolGather {
		return s.writeAt(chunk)
	}
	if s.buf == nil {
		s.buf = make([]byte, 0, spoolFlush)
	}
	for len(chunk) > 0 {
		n := min(len(chunk), spoolFlush-len(s.buf))
		s.buf = append(s.buf, chunk[:n]...)
		chunk = chunk[n:]
		if len(s.buf) == spoolFlush {
			if err := s.flush(); err != nil {
				return err
			}
		}
	}
	s.mu.Lock()
	s.received = s.written + int64(len(s.buf))
	s.mu.Unlock()
	return nil
}

// flush writes the buffer and empties it.
func (s *tgzSpool) flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	if err := s.writeAt(s.buf); err != nil {
		return err
	}
	s.buf = s.buf[:0]
	return nil
}

// writeAt appends b to the file (only the receiving goroutine writes) and
// wakes the reader.
func (s *tgzSpool) writeAt(b []byte) error {
	if _, err := s.f.WriteAt(b, s.written); err != nil {
		return err
	}
	s.mu.Lock()
	s.written += int64(len(b))
	s.received = s.written
	s.cond.Broadcast()
	s.mu.Unlock()
	return nil
}

func (s *tgzSpool) complete() error {
	if err := s.flush(); err != nil {
		return err
	}
	s.mu.Lock()
	s.done = true
	s.cond.Broadcast()
	s.mu.Unlock()
	return nil
}

func (s *tgzSpool) abort() {
	s.mu.Lock()
	s.aborted = true
	s.cond.Broadcast()
	s.mu.Unlock()
}

func (s *tgzSpool) length() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.written
}

// waitReceived waits until enough(received bytes) holds or the stream is
// complete, and says which.
func (s *tgzSpool) waitReceived(enough func(int64) bool) (complete bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !enough(s.received) && !s.done && !s.aborted {
		s.cond.Wait()
	}
	switch {
	case enough(s.received):
		return false, nil
	case s.aborted:
		return false, errSpoolAborted
	}
	return true, nil
}

// tgzReader reads the spool from the start, waiting for the Receiver.
type tgzReader struct {
	sp  *tgzSpool
	off int64
}

func (r *tgzReader) Read(p []byte) (int, error) {
	s := r.sp
	s.mu.Lock()
	for r.off >= s.written && !s.done && !s.aborted {
		s.cond.Wait()
	}
	avail, aborted := s.written-r.off, s.aborted
	s.mu.Unlock()
	if avail <= 0 {
		if aborted {
			return 0, errSpoolAborted
		}
		return 0, io.EOF
	}
	n, err := s.f.ReadAt(p[:min(int64(len(p)), avail)], r.off)
	r.off += int64(n)
	if errors.Is(err, io.EOF) && n > 0 {
		err = nil
	}
	return n, err
}

// errStreamIdle marks the error of a stream that stopped sending.
var errStreamIdle = errors.New("stream idle")

// idleStatus is errStreamIdle as a gRPC status the caller can act on.
type idleStatus struct{ st *status.Status }

func (e idleStatus) Error() string              { return e.st.Err().Error() }
func (e idleStatus) GRPCStatus() *status.Status { return e.st }
func (e idleStatus) Is(target error) bool       { return target == errStreamIdle }
