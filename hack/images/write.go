package main

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// built is one image written: its reference, the index digest, per-platform
// digests and the files.
type built struct {
	Ref       string
	Index     v1.Hash
	Platforms map[string]v1.Hash
	Files     []string
}

func (r built) String() string {
	s := fmt.Sprintf("%s\n  index %s", r.Ref, r.Index)
	for _, p := range platforms {
		key := p.OS + "/" + p.Architecture
		s += fmt.Sprintf("\n  %-12s %s", key, r.Platforms[key])
	}
	for _, f := range r.Files {
		if fi, err := os.Stat(f); err == nil {
			s += fmt.Sprintf("\n  %s (%.1f MB)", f, float64(fi.Size())/1e6)
		}
	}
	return s
}

// buildAll builds every image for every platform and writes them to out.
func buildAll(ctx context.Context, b buildInfo, out string) ([]built, error) {
	return buildSpecs(ctx, b, out, specs)
}

// buildSpecs builds the images of these specs for every platform into out.
func buildSpecs(ctx context.Context, b buildInfo, out string, these []imageSpec) ([]built, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	var results []built
	for _, spec := range these {
		ref, err := name.NewTag(b.Registry + "/" + spec.Name + ":" + b.Tag)
		if err != nil {
			return nil, err
		}
		r := built{Ref: ref.String(), Platforms: map[string]v1.Hash{}}
		idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
		for _, p := range platforms {
			img, err := buildImage(ctx, b, spec, p)
			if err != nil {
				return nil, err
			}
			d, err := img.Digest()
			if err != nil {
				return nil, err
			}
			r.Platforms[p.OS+"/"+p.Architecture] = d
			idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
			file := filepath.Join(out, fmt.Sprintf("%s-%s-%s.tar", spec.Name, p.OS, p.Architecture))
			if err := tarball.WriteToFile(file, ref, img); err != nil {
				return nil, err
			}
			r.Files = append(r.Files, file)
		}
		if r.Index, err = idx.Digest(); err != nil {
			return nil, err
		}
		file := filepath.Join(out, spec.Name+".oci.tar")
		if err := writeLayoutTar(file, ref, idx); err != nil {
			return nil, err
		}
		r.Files = append([]string{file}, r.Files...)
		results = append(results, r)
	}
	return results, nil
}

// writeLayoutTar writes idx as an OCI image layout, named as containerd and
// Docker read it, and tars the layout with fixed headers.
func writeLayoutTar(file string, ref name.Tag, idx v1.ImageIndex) error {
	dir, err := os.MkdirTemp("", "cmplayout")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref.TagStr(),
		"io.containerd.image.name":          ref.String(),
	})); err != nil {
		return err
	}
	return tarDir(dir, file)
}

// tarDir writes dir's regular files and directories into a tar at file, sorted,
// with zero times and owners, so the same layout gives the same bytes.
func tarDir(dir, file string) error {
	var paths []string
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		paths = append(paths, p)
		return nil
	}); err != nil {
		return err
	}
	sort.Strings(paths)
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Typeflag: tar.TypeReg, Size: fi.Size(), Format: tar.FormatPAX}
		if fi.IsDir() {
			h.Name, h.Mode, h.Typeflag, h.Size = h.Name+"/", 0o755, tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !fi.IsDir() {
			src, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, src)
			src.Close()
			if err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}
