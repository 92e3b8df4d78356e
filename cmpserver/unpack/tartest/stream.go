package tartest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"

	"github.com/cmp-injector/cmp-injector/cmpserver/pluginpb"
)

// Messages are a repository stream as Argo CD's repo-server sends it: the
// header (app path appRel, the tarball's checksum and size), then the
// tarball in chunks of 1 KiB (its default ARGOCD_CMP_CHUNK_SIZE).
func Messages(tgz []byte, appRel string) []*pluginpb.AppStreamRequest {
	sum := sha256.Sum256(tgz)
	msgs := []*pluginpb.AppStreamRequest{{Request: &pluginpb.AppStreamRequest_Metadata{Metadata: &pluginpb.ManifestRequestMetadata{
		AppRelPath: appRel, Checksum: hex.EncodeToString(sum[:]), Size: int64(len(tgz))}}}}
	for i := 0; i < len(tgz); i += 1024 {
		msgs = append(msgs, &pluginpb.AppStreamRequest{Request: &pluginpb.AppStreamRequest_File{File: &pluginpb.File{Chunk: tgz[i:min(i+1024, len(tgz))]}}})
	}
	return msgs
}

// Stream is the server's side of a stream of Msgs (unpack.Stream), ending
// with io.EOF.
type Stream struct{ Msgs []*pluginpb.AppStreamRequest }

// NewStream streams tgz for the app at appRel (Messages).
func NewStream(tgz []byte, appRel string) *Stream { return &Stream{Msgs: Messages(tgz, appRel)} }

// Context is the stream's context, never done.
func (s *Stream) Context() context.Context { return context.Background() }

// Recv gives the next message, then io.EOF.
func (s *Stream) Recv() (*pluginpb.AppStreamRequest, error) {
	if len(s.Msgs) == 0 {
		return nil, io.EOF
	}
	m := s.Msgs[0]
	s.Msgs = s.Msgs[1:]
	return m, nil
}
