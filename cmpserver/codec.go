package cmpserver

import (
	"encoding/binary"

	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	protov2 "google.golang.org/protobuf/proto"

	"github.com/cmp-injector/cmp-injector/cmpserver/pluginpb"
	"github.com/cmp-injector/cmp-injector/cmpserver/tracing"
)

// encodedManifests is a plugin.ManifestResponse built in its wire form while
// the generate output is split: field 1 (manifests, repeated string) once per
// object, field 2 (sourceType) never set, as Argo CD's server never sets it.
// Building []string and letting gRPC marshal it would hold the manifests twice
// at the moment of sending; this holds them once, in chunks, so no growing
// buffer is ever copied either.
type encodedManifests struct {
	chunks [][]byte
	size   int
	count  int
}

// traceAttributes describe the answer on its span (tracing.SpanSend).
func (m *encodedManifests) traceAttributes() []attribute.KeyValue {
	return []attribute.KeyValue{tracing.AttrManifests.Int(m.count), tracing.AttrResponseBytes.Int(m.size)}
}

// manifestChunk is the size of one buffer once an answer is big; a larger
// object gets its own. An answer's first buffer is firstManifestChunk and
// each next one twice the last, up to manifestChunk: most answers are a few
// KiB, and a MiB for each of 20 concurrent answers was a fifth of the
// server's heap in a refresh.
const (
	manifestChunk      = 1 << 20
	firstManifestChunk = 16 << 10
)

// Add appends doc, copied into the current chunk.
func (m *encodedManifests) Add(doc []byte) error {
	// Tag of field 1 with wire type 2 (length-delimited), the length, the bytes.
	need := 1 + binary.MaxVarintLen64 + len(doc)
	last := len(m.chunks) - 1
	if last < 0 || cap(m.chunks[last])-len(m.chunks[last]) < need {
		size := firstManifestChunk
		if last >= 0 {
			size = min(manifestChunk, 2*cap(m.chunks[last]))
		}
		m.chunks = append(m.chunks, make([]byte, 0, max(size, need)))
		last++
	}
	b := append(m.chunks[last], 0x0a)
	b = binary.AppendUvarint(b, uint64(len(doc)))
	b = append(b, doc...)
	m.size += len(b) - len(m.chunks[last])
	m.chunks[last] = b
	m.count++
	return nil
}

// Adopt keeps doc, which the caller gives up, as its own chunk when it is at
// least a chunk's size: a large document is then held once, not copied next
// to the buffer it was made in (the next document starts a new chunk). A
// smaller one is declined, to be added.
func (m *encodedManifests) Adopt(doc []byte) bool {
	if len(doc) < manifestChunk {
		return false
	}
	var head [1 + binary.MaxVarintLen64]byte
	h := append(head[:0], 0x0a)
	h = binary.AppendUvarint(h, uint64(len(doc)))
	last := len(m.chunks) - 1
	if last >= 0 && cap(m.chunks[last])-len(m.chunks[last]) >= len(h) {
		m.chunks[last] = append(m.chunks[last], h...)
	} else {
		m.chunks = append(m.chunks, append([]byte(nil), h...))
	}
	m.chunks = append(m.chunks, doc[:len(doc):len(doc)])
	m.size += len(h) + len(doc)
	m.count++
	return true
}

// compact is m in one buffer of exactly its size: what the render cache
// keeps. m's chunks are allocated a MiB at a time, so a small answer held
// as it was built would keep a MiB (and the cache's byte bound would count
// a few hundred).
func (m *encodedManifests) compact() *encodedManifests {
	b := make([]byte, 0, m.size)
	for _, c := range m.chunks {
		b = append(b, c...)
	}
	return &encodedManifests{chunks: [][]byte{b}, size: m.size, count: m.count}
}

// codec is gRPC's proto codec, except that an *encodedManifests is sent as is
// (gRPC checks the size against the send limit as for any message) and a
// repository chunk is received with one copy instead of two (Unmarshal).
type codec struct{ encoding.CodecV2 }

func newCodec() codec { return codec{encoding.GetCodecV2(proto.Name)} }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(*encodedManifests)
	if !ok {
		return c.CodecV2.Marshal(v)
	}
	out := make(mem.BufferSlice, len(m.chunks))
	for i, chunk := range m.chunks {
		out[i] = mem.SliceBuffer(chunk)
	}
	return out, nil
}

// A repository chunk arrives once per ARGOCD_CMP_CHUNK_SIZE bytes (32,000 with
// the injector's settings; an admin may set more). gRPC's proto codec gathers
// each message into a pooled buffer of the next size up (1 MiB for any chunk
// over 32 KiB), and proto.Unmarshal then copies the chunk out of it. A chunk
// message of at least aliasMin (an admin's larger chunk size; the injector's
// fits below it) is instead gathered once into a slice of its own size, which
// the chunk then is: one copy instead of two, and no MiB buffers kept in the
// pool. With 256 KiB chunks under 20 concurrent streams the sidecar's peak was
// about 2 MiB lower (docs/performance.md).

// aliasMin is the smallest message received this way: below it the pooled
// buffers are small and the second copy cheap.
const aliasMin = 32 << 10

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	req, ok := v.(*pluginpb.AppStreamRequest)
	if !ok || data.Len() < aliasMin {
		return c.CodecV2.Unmarshal(data, v)
	}
	return unmarshalRequest(data.Materialize(), req)
}

// unmarshalRequest is proto.Unmarshal of b into req, with a chunk message's
// chunk kept as a slice of b.
func unmarshalRequest(b []byte, req *pluginpb.AppStreamRequest) error {
	if chunk, ok := fileChunk(b); ok {
		req.Reset()
		req.Request = &pluginpb.AppStreamRequest_File{File: &pluginpb.File{Chunk: chunk}}
		return nil
	}
	return protov2.Unmarshal(b, req)
}

// Field numbers of plugin.proto.
const (
	fieldRequestFile protowire.Number = 2 // AppStreamRequest.file
	fieldFileChunk   protowire.Number = 1 // File.chunk
)

// fileChunk reads b as an AppStreamRequest holding a File holding a chunk and
// nothing else, which is what clients send, and returns the chunk. Anything
// else (the metadata, a field twice, an unknown field) is proto.Unmarshal's.
func fileChunk(b []byte) ([]byte, bool) {
	file, ok := onlyBytesField(b, fieldRequestFile)
	if !ok {
		return nil, false
	}
	return onlyBytesField(file, fieldFileChunk)
}

// onlyBytesField is the value of b's one field when b is exactly one
// length-delimited field numbered num.
func onlyBytesField(b []byte, num protowire.Number) ([]byte, bool) {
	n, typ, tagLen := protowire.ConsumeTag(b)
	if tagLen < 0 || n != num || typ != protowire.BytesType {
		return nil, false
	}
	v, valLen := protowire.ConsumeBytes(b[tagLen:])
	if valLen < 0 || tagLen+valLen != len(b) {
		return nil, false
	}
	return v, true
}
