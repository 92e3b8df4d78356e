package unpack

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"
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
