package catalog

import (
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// The default chunk size is chosen so that a chunk's message fits gRPC's
// 32 KiB pooled buffer: one byte more of message and gRPC marshals it into a
// 1 MiB buffer, which through the whole Argo CD cost the repo-server about
// 80 MiB under 20 concurrent streams (docs/performance.md). The message is
// Argo CD's AppStreamRequest{file: File{chunk}} (fields 2 and 1), sized the
// way protobuf encodes it, and the buffer is what gRPC's own default pool
// hands out for that size.
func TestDefaultChunkFitsGRPCsBufferTier(t *testing.T) {
	file := protowire.SizeTag(1) + protowire.SizeBytes(DefaultCMPChunkSize)
	msg := protowire.SizeTag(2) + protowire.SizeBytes(file)
	buf := mem.DefaultBufferPool().Get(msg)
	defer mem.DefaultBufferPool().Put(buf)
	if got := cap(*buf); got > 32<<10 {
		t.Errorf("a %d-byte chunk is a %d-byte message, which gRPC marshals into a %d-byte buffer, want at most 32 KiB", DefaultCMPChunkSize, msg, got)
	}
	// And not needlessly small: within 1 KiB of the tier.
	if msg < 31<<10 {
		t.Errorf("a %d-byte chunk is a %d-byte message, more than 1 KiB under gRPC's 32 KiB buffer", DefaultCMPChunkSize, msg)
	}
}
