package unpack

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/cmpserver/pluginpb"
)

// TestSpoolReaderFollowsWriter: the extraction's reader waits for the
// receiver, sees every byte once, and fails once the stream is abandoned.
func TestSpoolReaderFollowsWriter(t *testing.T) {
	t.Parallel()
	sp, err := newTgzSpool(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer sp.f.Close()
	want := make([]byte, 3*spoolFlush+17)
	if _, err := rand.Read(want); err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte, 1)
	go func() {
		var all []byte
		buf := make([]byte, 7000)
		r := &tgzReader{sp: sp}
		for {
			n, err := r.Read(buf)
			all = append(all, buf[:n]...)
			if err != nil {
				break
			}
		}
		got <- all
	}()
	for i := 0; i < len(want); i += 1000 {
		if err := sp.write(want[i:min(i+1000, len(want))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := sp.complete(); err != nil {
		t.Fatal(err)
	}
	if g := <-got; string(g) != string(want) {
		t.Fatalf("read %d bytes, want the %d written", len(g), len(want))
	}

	aborted, err := newTgzSpool(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer aborted.f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res := make(chan error, 1)
	go func() {
		_, err := (&tgzReader{sp: aborted}).Read(make([]byte, 10))
		res <- err
	}()
	aborted.abort()
	select {
	case err := <-res:
		if !errors.Is(err, errSpoolAborted) {
			t.Fatalf("read after abort: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("reader still waiting after abort")
	}
}

// TestSpoolChunkSizes: chunks of any size, small ones gathered, big ones
// written as they come (also right after small ones), reach the reader in
// order; a stream of chunks of spoolGather bytes or more (the injector's are
// 256 KiB, its last one smaller) never holds a
// gathering buffer, which 20 concurrent streams would hold 20 times.
func TestSpoolChunkSizes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		sizes []int
		noBuf bool
	}{
		{"injector's chunks", []int{256 << 10, 256 << 10, 256 << 10, 12345}, true},
		{"a chunk of the smallest size written as is", []int{spoolGather, spoolGather, spoolGather}, true},
		{"Argo CD's chunks", []int{1024, 1024, 1024, 1024}, false},
		{"mixed", []int{100, spoolFlush * 2, 5, spoolFlush - 1, spoolGather - 1, spoolFlush + 1, 3 * spoolFlush, 7, spoolGather}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sp, err := newTgzSpool(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer sp.f.Close()
			var want []byte
			for _, n := range tc.sizes {
				chunk := make([]byte, n)
				if _, err := rand.Read(chunk); err != nil {
					t.Fatal(err)
				}
				if err := sp.write(chunk); err != nil {
					t.Fatal(err)
				}
				want = append(want, chunk...)
				if got := sp.received; got != int64(len(want)) {
					t.Fatalf("received %d after %d bytes", got, len(want))
				}
			}
			if err := sp.complete(); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(&tgzReader{sp: sp})
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Fatalf("read %d bytes, want the %d written in order", len(got), len(want))
			}
			if tc.noBuf && sp.buf != nil {
				t.Fatalf("the spool gathered chunks of %v into a %d-byte buffer", tc.sizes, cap(sp.buf))
			}
		})
	}
}

// eofStream is a client that has sent everything.
type eofStream struct{}

func (eofStream) Context() context.Context                  { return context.Background() }
func (eofStream) Recv() (*pluginpb.AppStreamRequest, error) { return nil, io.EOF }

// Once the client has sent the whole stream, a long extraction is not a
// client that stopped sending: the extraction's own error reaches the client
// (issue 37 item 8: 999,000 symlinks ended with "no message on the stream for
// 1m0s: the client stopped sending"). The phase stands in for an extraction
// still running long after the last message: it waits, boundedly, for the
// watcher to give up on the request, which it must not.
func TestIdleBoundEndsWithTheStream(t *testing.T) {
	t.Parallel()
	// The bound must outlast the phase's first step (recv seeing the end of
	// the stream) on a loaded machine; the phase then outwaits it.
	r := NewReceiver(eofStream{}, DefaultLimits(), 300*time.Millisecond)
	unpackErr := errors.New("error decompressing tgz file: the extraction's own error")
	_, err := r.watch(func() (*Repo, error) {
		if _, err := r.recv(); !errors.Is(err, io.EOF) {
			t.Errorf("recv: %v", err)
		}
		r.lastMsg.Store(0) // the last message came long ago
		for range 200 {
			r.mu.Lock()
			abandoned := r.abandoned
			r.mu.Unlock()
			if abandoned {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		return nil, unpackErr
	})
	if !errors.Is(err, unpackErr) {
		t.Fatalf("got %v, want the extraction's error", err)
	}
}
