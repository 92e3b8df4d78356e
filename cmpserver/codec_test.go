package cmpserver

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/cmp-injector/cmp-injector/cmpserver/pluginpb"
)

// TestEncodedManifestsMatchProto: the response built in wire form is byte for
// byte what proto.Marshal makes of a ManifestResponse with the same manifests,
// across chunk boundaries and for documents larger than a chunk, added
// (copied) or adopted (kept as their own chunk) alike.
func TestEncodedManifestsMatchProto(t *testing.T) {
	for _, adopt := range []bool{false, true} {
		testEncodedManifests(t, adopt)
	}
}

// manyDocs is n documents of size bytes, each different.
func manyDocs(n, size int) []string {
	docs := make([]string, n)
	for i := range docs {
		docs[i] = strings.Repeat(string(rune('a'+i%26)), size)
	}
	return docs
}

// TestEncodedManifestsGrow: an answer's first buffer is small (most answers
// are a few KiB, and 20 are built at once in a refresh) and each next one
// twice the last, up to manifestChunk.
func TestEncodedManifestsGrow(t *testing.T) {
	var small encodedManifests
	if err := small.Add([]byte(`{"kind":"ConfigMap"}`)); err != nil {
		t.Fatal(err)
	}
	if c := cap(small.chunks[0]); c != firstManifestChunk {
		t.Fatalf("a one-object answer holds a %d-byte buffer, want %d", c, firstManifestChunk)
	}
	var big encodedManifests
	for _, d := range manyDocs(300, 10<<10) {
		if err := big.Add([]byte(d)); err != nil {
			t.Fatal(err)
		}
	}
	want := firstManifestChunk
	for i, c := range big.chunks {
		if cap(c) != want {
			t.Fatalf("buffer %d holds %d bytes, want %d (all: %d buffers)", i, cap(c), want, len(big.chunks))
		}
		want = min(manifestChunk, 2*want)
	}
	if want != manifestChunk {
		t.Fatalf("3 MB of objects never reached %d-byte buffers", manifestChunk)
	}
}

func testEncodedManifests(t *testing.T, adopt bool) {
	for _, docs := range [][]string{
		nil,
		{`{"kind":"ConfigMap"}`},
		{"a", strings.Repeat("b", 200), strings.Repeat("c", manifestChunk-10), "d", strings.Repeat("e", 3*manifestChunk), "f"},
		manyDocs(300, 10<<10), // 3 MB: buffers of every size up to manifestChunk
	} {
		var m encodedManifests
		for i, d := range docs {
			if adopt && i%2 == 1 && m.Adopt([]byte(d)) {
				continue
			}
			if err := m.Add([]byte(d)); err != nil {
				t.Fatal(err)
			}
		}
		got, err := newCodec().Marshal(&m)
		if err != nil {
			t.Fatal(err)
		}
		want, err := proto.Marshal(&pluginpb.ManifestResponse{Manifests: docs})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Materialize(), want) || got.Len() != m.size || m.count != len(docs) {
			t.Errorf("adopt %v, %d manifests: encoding differs from proto.Marshal (%d bytes, want %d)", adopt, len(docs), got.Len(), len(want))
		}
		var back pluginpb.ManifestResponse
		if err := proto.Unmarshal(got.Materialize(), &back); err != nil || len(back.Manifests) != len(docs) {
			t.Errorf("does not decode: %v", err)
		}
		// What the render cache keeps: the same bytes in one buffer of
		// exactly their size (a chunk is allocated a MiB at a time).
		c := m.compact()
		kept, err := newCodec().Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(kept.Materialize(), want) || len(c.chunks) != 1 || cap(c.chunks[0]) != m.size || c.count != m.count {
			t.Errorf("adopt %v, %d manifests: compacted to %d chunks of capacity %d for %d bytes", adopt, len(docs), len(c.chunks), cap(c.chunks[0]), m.size)
		}
	}
}
