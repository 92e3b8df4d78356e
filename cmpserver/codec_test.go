package cmpserver

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
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

// chunkRequest is the wire form of an AppStreamRequest holding a File with
// chunk, as clients marshal it.
func chunkRequest(t testing.TB, chunk []byte) []byte {
	t.Helper()
	b, err := proto.Marshal(&pluginpb.AppStreamRequest{Request: &pluginpb.AppStreamRequest_File{File: &pluginpb.File{Chunk: chunk}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestUnmarshalRequestMatchesProto: a received request decodes as
// proto.Unmarshal decodes it, whether it is a chunk message (read without the
// second copy: the chunk is a slice of what was received) or anything else,
// through the codec gRPC calls, in one buffer or in frames.
func TestUnmarshalRequestMatchesProto(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 16<<10) // 256 KiB
	meta, err := proto.Marshal(&pluginpb.AppStreamRequest{Request: &pluginpb.AppStreamRequest_Metadata{Metadata: &pluginpb.ManifestRequestMetadata{
		AppName: "a", AppRelPath: "apps/a", Checksum: strings.Repeat("c", 64), Size: 5,
		Env: []*pluginpb.EnvEntry{{Name: "BIG", Value: string(big[:aliasMin])}}}}})
	if err != nil {
		t.Fatal(err)
	}
	chunk := chunkRequest(t, big)
	fileTwice := append(append([]byte(nil), chunk...), chunkRequest(t, []byte("second"))...)
	unknown := append(append([]byte(nil), chunk...), protowire.AppendTag(nil, 9, protowire.VarintType)...)
	unknown = protowire.AppendVarint(unknown, 7)
	for name, tc := range map[string]struct {
		wire    []byte
		aliased bool
	}{
		"chunk":               {chunk, true},
		"small chunk":         {chunkRequest(t, []byte("tiny")), false},
		"metadata":            {meta, false},
		"file field twice":    {fileTwice, false},
		"unknown field after": {unknown, false},
		"chunk cut short":     {chunk[:len(chunk)-10], false},
	} {
		t.Run(name, func(t *testing.T) {
			var want pluginpb.AppStreamRequest
			wantErr := proto.Unmarshal(tc.wire, &want)
			for _, frames := range []int{1, 3} {
				data := mem.BufferSlice{}
				step := (len(tc.wire) + frames - 1) / frames
				for i := 0; i < len(tc.wire); i += step {
					data = append(data, mem.SliceBuffer(tc.wire[i:min(i+step, len(tc.wire))]))
				}
				var got pluginpb.AppStreamRequest
				err := newCodec().Unmarshal(data, &got)
				if (err == nil) != (wantErr == nil) || (err == nil && !proto.Equal(&got, &want)) {
					t.Fatalf("%d frames: got %v (%v), proto.Unmarshal %v (%v)", frames, err, &got, wantErr, &want)
				}
			}
			var direct pluginpb.AppStreamRequest
			b := append([]byte(nil), tc.wire...)
			if err := unmarshalRequest(b, &direct); tc.aliased {
				if err != nil {
					t.Fatal(err)
				}
				c := direct.GetFile().GetChunk()
				if len(c) == 0 || &c[0] != &b[len(b)-len(c)] {
					t.Fatal("the chunk was copied out of the received message")
				}
			}
		})
	}
}

// FuzzUnmarshalRequest: whatever arrives, the chunk path and proto.Unmarshal
// agree on the error and the message.
func FuzzUnmarshalRequest(f *testing.F) {
	f.Add(chunkRequest(f, []byte("chunk")))
	f.Add(chunkRequest(f, nil))
	f.Add([]byte{0x12, 0x00})
	f.Add([]byte{0x12, 0x02, 0x0a, 0x00})
	f.Add([]byte{0x12, 0x03, 0x0a, 0x01, 0x41, 0x12, 0x00})
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		var got, want pluginpb.AppStreamRequest
		err := unmarshalRequest(append([]byte(nil), b...), &got)
		wantErr := proto.Unmarshal(b, &want)
		if (err == nil) != (wantErr == nil) || (err == nil && !proto.Equal(&got, &want)) {
			t.Fatalf("%x: got %v (%v), proto.Unmarshal %v (%v)", b, err, &got, wantErr, &want)
		}
	})
}
