package cmpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

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
// pattern), hashing as it goes. The error strings of Argo CD's server are kept
// where they exist, since users search for them.
func receiveRepo(stream appStream, dir string, maxCompressed int64) (*receivedRepo, error) {
	ctx := stream.Context()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("stream context error: %w", err)
	}
	first, err := stream.Recv()
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
	var size int64
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("stream context error: %w", err)
		}
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
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
	}
	if got := hex.EncodeToString(hash.Sum(nil)); got != meta.GetChecksum() {
		return nil, errors.New("file checksum validation error")
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("error writing repository tarball: %w", err)
	}
	return &receivedRepo{meta: meta, path: f.Name(), size: size}, nil
}
