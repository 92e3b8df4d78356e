package cmpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cmp-injector/cmp-injector/cmpserver/pluginpb"
)

// appStream is the receiving side of the three client-streaming RPCs.
type appStream interface {
	Context() context.Context
	Recv() (*pluginpb.AppStreamRequest, error)
}

// receivedRepo is a repository tarball written to disk whose checksum matched.
type receivedRepo struct {
	meta *pluginpb.ManifestRequestMetadata
	path string
	size int64
}

// receiveRepo reads the metadata message and then every file chunk into a temp
// file in dir (the request dir, named like Argo CD's: os.CreateTemp with no
// pattern), hashing as it goes. A stream that sends nothing for idle (> 0) is
// ended. With check, the tarball is also decompressed as it arrives and checked
// against the extraction limits, so that a tarball over them (a gzip bomb) is
// refused before anything is extracted. The error strings of Argo CD's server
// are kept where they exist, since users search for them.
func receiveRepo(stream appStream, dir string, limits Limits, check bool, idle time.Duration) (*receivedRepo, error) {
	ctx := stream.Context()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("stream context error: %w", err)
	}
	in := newIdleReceiver(stream, idle)
	defer in.stop()
	first, err := in.recv()
	if errors.Is(err, errStreamIdle) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("error receiving stream metadata: %w", err)
	}
	meta := first.GetMetadata()
	if meta == nil {
		return nil, errors.New("error getting stream metadata: metadata is nil")
	}
	f, err := os.CreateTemp(dir, "")
	if err != nil {
		return nil, fmt.Errorf("error creating temp file: %w", err)
	}
	defer f.Close()
	hash := sha256.New()
	w := io.MultiWriter(f, hash)
	var scan *limitScan
	if check && (limits.MaxExtractedBytes > 0 || limits.MaxFiles > 0) {
		scan = startLimitScan(limits)
		defer scan.stop()
	}
	maxCompressed := limits.MaxCompressedBytes
	var size int64
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("stream context error: %w", err)
		}
		msg, err := in.recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if errors.Is(err, errStreamIdle) {
				return nil, err
			}
			return nil, fmt.Errorf("error receiving stream: %w", err)
		}
		file := msg.GetFile()
		if file == nil {
			return nil, errors.New("stream request file is nil")
		}
		size += int64(len(file.Chunk))
		if maxCompressed > 0 && size > maxCompressed {
			return nil, fmt.Errorf("repository tarball exceeds %d compressed bytes (limit --max-compressed-bytes)", maxCompressed)
		}
		if _, err := w.Write(file.Chunk); err != nil {
			return nil, fmt.Errorf("error writing repository tarball: %w", err)
		}
		if scan != nil {
			if err := scan.feed(file.Chunk); err != nil {
				return nil, err
			}
		}
	}
	if got := hex.EncodeToString(hash.Sum(nil)); got != meta.GetChecksum() {
		return nil, errors.New("file checksum validation error")
	}
	if scan != nil {
		if err := scan.finish(); err != nil {
			return nil, err
		}
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("error writing repository tarball: %w", err)
	}
	return &receivedRepo{meta: meta, path: f.Name(), size: size}, nil
}

// limitScan runs checkTgzLimits on the chunks of a tarball as they arrive, in
// its own goroutine behind a buffer, so receiving does not wait for
// decompression and a bomb is refused while it is still being received.
type limitScan struct {
	chunks chan []byte
	done   chan struct{}
	err    error // set before done is closed
	once   sync.Once
}

func startLimitScan(limits Limits) *limitScan {
	s := &limitScan{chunks: make(chan []byte, 256), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.err = checkTgzLimits(&chunkReader{chunks: s.chunks}, limits)
	}()
	return s
}

// feed hands over the next chunk (not copied: gRPC gives every message its own
// memory); it returns the limit error as soon as the check has found one.
func (s *limitScan) feed(chunk []byte) error {
	select {
	case s.chunks <- chunk:
		return nil
	case <-s.done:
		// Over a limit, or the check has ended (the tar ended or is damaged,
		// which the extraction reports): either way no more chunks are needed.
		return s.err
	}
}

// finish ends the input and returns the check's result.
func (s *limitScan) finish() error {
	s.stop()
	<-s.done
	return s.err
}

// stop ends the input; the check then ends too, so its goroutine never leaks.
func (s *limitScan) stop() { s.once.Do(func() { close(s.chunks) }) }

// chunkReader reads a channel of byte slices as one stream.
type chunkReader struct {
	chunks <-chan []byte
	cur    []byte
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		chunk, ok := <-r.chunks
		if !ok {
			return 0, io.EOF
		}
		r.cur = chunk
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// errStreamIdle marks the error of a stream that stopped sending.
var errStreamIdle = errors.New("stream idle")

// idleStatus is errStreamIdle as a gRPC status the caller can act on.
type idleStatus struct{ st *status.Status }

func (e idleStatus) Error() string              { return e.st.Err().Error() }
func (e idleStatus) GRPCStatus() *status.Status { return e.st }
func (e idleStatus) Is(target error) bool       { return target == errStreamIdle }

// idleReceiver bounds the wait for each stream message. gRPC cannot interrupt a
// server-side Recv (its context only ends with the client, the client's deadline
// or the handler), so with a timeout Recv runs in its own goroutine and the
// handler stops waiting for it; returning from the handler then cancels the
// stream, which ends that Recv and the goroutine with it.
type idleReceiver struct {
	stream  appStream
	idle    time.Duration
	results chan recvResult
	done    chan struct{}
	timer   *time.Timer
}

type recvResult struct {
	msg *pluginpb.AppStreamRequest
	err error
}

func newIdleReceiver(stream appStream, idle time.Duration) *idleReceiver {
	r := &idleReceiver{stream: stream, idle: idle}
	if idle > 0 {
		r.results = make(chan recvResult)
		r.done = make(chan struct{})
		go r.loop()
	}
	return r
}

func (r *idleReceiver) loop() {
	for {
		msg, err := r.stream.Recv()
		select {
		case r.results <- recvResult{msg, err}:
		case <-r.done:
			return
		}
		if err != nil {
			return
		}
	}
}

func (r *idleReceiver) recv() (*pluginpb.AppStreamRequest, error) {
	if r.results == nil {
		return r.stream.Recv()
	}
	if r.timer == nil {
		r.timer = time.NewTimer(r.idle)
	} else {
		r.timer.Reset(r.idle)
	}
	select {
	case res := <-r.results:
		return res.msg, res.err
	case <-r.timer.C:
		return nil, idleStatus{status.Newf(codes.DeadlineExceeded,
			"no message on the stream for %s: the client stopped sending (limit --stream-idle-timeout)", r.idle)}
	}
}

// stop lets the receiving goroutine exit; call it once the stream is no longer read.
func (r *idleReceiver) stop() {
	if r.timer != nil {
		r.timer.Stop()
	}
	if r.done != nil {
		close(r.done)
	}
}
