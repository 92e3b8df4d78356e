// Package oci assembles image layers and images with go-containerregistry, with
// no container engine: `make images` builds the product images with it, and the
// end-to-end suite's real node builds its test images (pause, shells, Argo CD's
// repo-server) with the same code.
package oci

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Entry is one file, directory or symbolic link of a layer.
type Entry struct {
	Path string // relative to the image root, slash separated
	Mode int64  // permission bits, plus os.ModeDir for a directory
	UID  int    // owner (and group, unless GID is set)
	GID  *int   // group, when it is not the owner's
	Data []byte
	Link string // a symbolic link to Link when set
}

// groupDir is a directory entry with mode perm owned by uid and group gid.
func groupDir(path string, perm int64, uid, gid int) Entry {
	return Entry{Path: path, Mode: perm | int64(os.ModeDir), UID: uid, GID: &gid}
}

// dirEntry is a directory entry with mode perm.
func dirEntry(path string, perm int64, uid int) Entry {
	return Entry{Path: path, Mode: perm | int64(os.ModeDir), UID: uid}
}

// Layer writes entries (and their parent directories) into a tar with one
// timestamp and sorted names, so the same input always gives the same digest.
// The gzip of it is kept once made: the digest, the docker-save tarball and
// the OCI layout would each compress it again (cmp-cdk8s's runtime layer is
// 200 MB).
func Layer(entries []Entry, epoch time.Time) (v1.Layer, error) {
	all := map[string]Entry{}
	for _, e := range entries {
		if strings.Contains(e.Path, "..") || strings.HasPrefix(e.Path, "/") {
			return nil, fmt.Errorf("bad layer path %q", e.Path)
		}
		all[e.Path] = e
		for d := filepath.Dir(e.Path); d != "."; d = filepath.Dir(d) {
			if _, ok := all[d]; !ok {
				all[d] = dirEntry(d, 0o755, 0)
			}
		}
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		e := all[n]
		h := &tar.Header{Name: n, Mode: e.Mode &^ int64(os.ModeDir), ModTime: epoch, Uid: e.UID, Gid: groupOf(e),
			Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(e.Data))}
		switch {
		case e.Link != "":
			h.Typeflag, h.Linkname, h.Size, h.Mode = tar.TypeSymlink, e.Link, 0, 0o777
		case e.Mode&int64(os.ModeDir) != 0:
			h.Typeflag, h.Name, h.Size = tar.TypeDir, n+"/", 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.Data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

// groupOf is the entry's group: its GID, else its owner's.
func groupOf(e Entry) int {
	if e.GID != nil {
		return *e.GID
	}
	return e.UID
}
