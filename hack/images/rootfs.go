package main

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/cmp-injector/cmp-injector/hack/images/oci"
)

// rootfsSpec is a plugin image's runtime that Go cannot build (cdk8s:
// Node.js): Debian's packages from the plugin's debian.lock (written by
// hack/debian-lock.sh) and npm packages from its tools/package-lock.json,
// unpacked with none of their scripts run. hack/tools.sh writes the same
// tree for bin/ with `go run ./hack/images -rootfs NAME`, so the tests run
// what the image ships.
type rootfsSpec struct {
	Name string // bin/<Name>, hack/tools.sh's tool and -rootfs's argument
	Dir  string // deploy/plugins/<plugin>: debian.lock and tools/
	// Modules is where tools/'s node_modules goes in the image.
	Modules string
	// Scripts are the executables that start the tool, given the
	// commands of node_modules/.bin (name → the JavaScript file it runs).
	Scripts func(bins map[string]string) []oci.Entry
	// DebianLicenses are the Debian packages' licences (SPDX); the npm
	// packages' are read from the lockfile.
	DebianLicenses []string
}

// debPin is one line of a debian.lock.
type debPin struct{ Arch, Package, Version, SHA256, URL string }

// rootfsLayers are the two layers of spec for arch: the Debian packages, and
// the npm packages with the start scripts; how says what each holds.
func rootfsLayers(ctx context.Context, b buildInfo, spec rootfsSpec, arch string) (debs, npm []oci.Entry, how [2]string, err error) {
	pins, err := readDebianLock(filepath.Join(b.Root, filepath.FromSlash(spec.Dir), "debian.lock"), arch)
	if err != nil {
		return nil, nil, how, err
	}
	var names []string
	for _, p := range pins {
		es, err := unpackDeb(ctx, p)
		if err != nil {
			return nil, nil, how, err
		}
		debs = mergeEntries(debs, es)
		names = append(names, p.Package+"="+p.Version)
	}
	how[0] = "Debian bookworm packages (" + spec.Dir + "/debian.lock, unpacked, no scripts run): " + strings.Join(names, " ")
	npm, bins, err := npmTree(ctx, b, spec)
	if err != nil {
		return nil, nil, how, err
	}
	npm = append(npm, spec.Scripts(bins)...)
	how[1] = "npm ci --ignore-scripts of " + spec.Dir + "/tools/package-lock.json into /" + spec.Modules
	return debs, npm, how, nil
}

// readDebianLock reads the lock's pins for arch, in order.
func readDebianLock(file, arch string) ([]debPin, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var pins []debPin
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) != 5 || len(fs[3]) != 64 {
			return nil, fmt.Errorf("%s:%d: want ARCH PACKAGE VERSION SHA256 URL (hack/debian-lock.sh writes it), got %q", file, n, line)
		}
		if fs[0] == arch {
			pins = append(pins, debPin{fs[0], fs[1], fs[2], fs[3], fs[4]})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(pins) == 0 {
		return nil, fmt.Errorf("%s pins no package for %s: run hack/debian-lock.sh", file, arch)
	}
	return pins, nil
}

// fetchDeb is the pinned package's file, downloaded once into the cache
// outside the clone and checked against the lock's SHA-256 on every use: the
// mirror is plain HTTP, the lock is what is trusted.
func fetchDeb(ctx context.Context, p debPin) (string, error) {
	dir := filepath.Join(cacheDir(), "debian")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	file := filepath.Join(dir, path.Base(p.URL))
	if sum, err := fileSHA256(file); err == nil && sum == p.SHA256 {
		return file, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("downloading %s %s: %w", p.Package, p.Version, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("downloading %s %s from %s: %s (Debian drops superseded versions from its pool: run hack/debian-lock.sh to pin the current ones)",
			p.Package, p.Version, p.URL, resp.Status)
	}
	tmp, err := os.CreateTemp(dir, ".deb-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), resp.Body); err != nil {
		tmp.Close()
		return "", fmt.Errorf("downloading %s: %w", p.URL, err)
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != p.SHA256 {
		return "", fmt.Errorf("%s has SHA-256 %s, the lock pins %s", p.URL, got, p.SHA256)
	}
	return file, os.Rename(tmp.Name(), file)
}

func fileSHA256(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// cacheDir is hack/tools.sh's cache, outside the clone.
func cacheDir() string {
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "cmp-injector")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "cmp-injector")
}

// droppedDocs are what an image has no use for: manuals and Debian's
// bookkeeping. Each package's copyright file (its licence) is kept.
var droppedDocs = []string{"usr/share/man/", "usr/share/info/", "usr/share/lintian/", "usr/share/bug/", "usr/share/doc/"}

// unpackDeb is a package's files as layer entries: dpkg-deb (Debian's own
// unpacker, as on every Debian build machine) reads the archive, and its
// maintainer scripts are not run.
func unpackDeb(ctx context.Context, p debPin) ([]oci.Entry, error) {
	file, err := fetchDeb(ctx, p)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "dpkg-deb", "--fsys-tarfile", file)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("dpkg-deb (Debian's dpkg package) unpacks %s: %w", p.Package, err)
	}
	entries, terr := readTar(out)
	_, _ = io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("dpkg-deb --fsys-tarfile %s: %w\n%s", file, err, stderr.String())
	}
	if terr != nil {
		return nil, fmt.Errorf("unpacking %s: %w", file, terr)
	}
	return entries, nil
}

// readTar turns a package's data tar into entries, less droppedDocs; a hard
// link becomes a copy of the file it names.
func readTar(r io.Reader) ([]oci.Entry, error) {
	tr := tar.NewReader(r)
	var entries []oci.Entry
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return entries, nil
		}
		if err != nil {
			return nil, err
		}
		name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
		if name == "" || name == "." || dropped(name) {
			continue
		}
		e := oci.Entry{Path: name, Mode: h.Mode & 0o7777}
		switch h.Typeflag {
		case tar.TypeDir:
			e.Mode |= int64(os.ModeDir)
		case tar.TypeSymlink:
			e.Link = h.Linkname
		case tar.TypeLink:
			data, ok := files[strings.TrimPrefix(h.Linkname, "./")]
			if !ok {
				return nil, fmt.Errorf("%s links to %s, which comes later or not at all", name, h.Linkname)
			}
			e.Data = data
		case tar.TypeReg:
			if e.Data, err = io.ReadAll(tr); err != nil {
				return nil, err
			}
			files[name] = e.Data
		default:
			return nil, fmt.Errorf("%s: unexpected tar entry type %q", name, h.Typeflag)
		}
		entries = append(entries, e)
	}
}

func dropped(name string) bool {
	if strings.HasPrefix(name, "usr/share/doc/") && path.Base(name) == "copyright" {
		return false
	}
	for _, d := range droppedDocs {
		if strings.HasPrefix(name+"/", d) {
			return true
		}
	}
	return false
}

// mergeEntries adds more to entries; a later package's directory entry does
// not replace an earlier one (they are the same), any other repeat is the
// later one, as dpkg would leave it.
func mergeEntries(entries, more []oci.Entry) []oci.Entry {
	at := map[string]int{}
	for i, e := range entries {
		at[e.Path] = i
	}
	for _, e := range more {
		if i, ok := at[e.Path]; ok {
			if e.Mode&int64(os.ModeDir) == 0 {
				entries[i] = e
			}
			continue
		}
		at[e.Path] = len(entries)
		entries = append(entries, e)
	}
	return entries
}

// npmTree runs npm ci on the plugin's tools/ lockfile (the integrity of
// every package checked by npm, no install scripts run) in a scratch
// directory and returns node_modules as entries under spec.Modules, and
// node_modules/.bin's commands. A compiled addon (.node) would tie the tree
// to the build machine's architecture, so it is refused.
func npmTree(ctx context.Context, b buildInfo, spec rootfsSpec) ([]oci.Entry, map[string]string, error) {
	work, err := os.MkdirTemp(b.WorkDir, "npm-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(work)
	for _, f := range []string{"package.json", "package-lock.json"} {
		data, err := os.ReadFile(filepath.Join(b.Root, filepath.FromSlash(spec.Dir), "tools", f))
		if err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(filepath.Join(work, f), data, 0o644); err != nil {
			return nil, nil, err
		}
	}
	cmd := exec.CommandContext(ctx, "npm", "ci", "--ignore-scripts", "--omit=dev", "--no-audit", "--no-fund", "--no-update-notifier",
		"--cache", filepath.Join(cacheDir(), "npm"))
	cmd.Dir = work
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, nil, fmt.Errorf("npm ci in %s/tools (the machine's npm, from the npm registry): %w\n%s", spec.Dir, err, out)
	}
	root := filepath.Join(work, "node_modules")
	var entries []oci.Entry
	bins := map[string]string{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, root+string(filepath.Separator)))
		if rel == ".package-lock.json" {
			return nil // npm's record of this install, with paths of the scratch directory's
		}
		if strings.HasSuffix(rel, ".node") {
			return fmt.Errorf("node_modules/%s is a compiled addon: the image holds one tree for every architecture", rel)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := oci.Entry{Path: spec.Modules + "/" + rel, Mode: 0o644}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			if e.Link, err = os.Readlink(p); err != nil {
				return err
			}
			if dir, name := path.Split(rel); dir == ".bin/" {
				bins[name] = path.Clean(path.Join(spec.Modules, ".bin", e.Link))
			}
		case d.IsDir():
			e.Mode = 0o755 | int64(os.ModeDir)
		default:
			if info.Mode()&0o111 != 0 {
				e.Mode = 0o755
			}
			if e.Data, err = os.ReadFile(p); err != nil {
				return err
			}
		}
		entries = append(entries, e)
		return nil
	})
	return entries, bins, err
}

// npmLicenses are the licences the lockfile records for its packages.
func npmLicenses(root string, spec rootfsSpec) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(spec.Dir), "tools", "package-lock.json"))
	if err != nil {
		return nil, err
	}
	var lock struct {
		Packages map[string]struct {
			License string `json:"license"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(data, &lock); err != nil {
		return nil, fmt.Errorf("%s/tools/package-lock.json: %w", spec.Dir, err)
	}
	var out []string
	for name, p := range lock.Packages {
		if name != "" && p.License != "" && !slices.Contains(out, p.License) {
			out = append(out, p.License)
		}
	}
	slices.Sort(out)
	return out, nil
}

// writeRootfs writes entries under dir (hack/tools.sh's copy for bin/),
// replacing what was there.
func writeRootfs(dir string, entries []oci.Entry) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	for _, e := range entries {
		p := filepath.Join(dir, filepath.FromSlash(e.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		switch {
		case e.Link != "":
			_ = os.Remove(p)
			if err := os.Symlink(e.Link, p); err != nil {
				return err
			}
		case e.Mode&int64(os.ModeDir) != 0:
			if err := os.MkdirAll(p, fs.FileMode(e.Mode&0o777)); err != nil {
				return err
			}
		default:
			if err := os.WriteFile(p, e.Data, fs.FileMode(e.Mode&0o777)); err != nil {
				return err
			}
			if err := os.Chmod(p, fs.FileMode(e.Mode&0o777)); err != nil {
				return err
			}
		}
	}
	return nil
}

// rootfsAddenda are spec's two layers for arch.
func rootfsAddenda(ctx context.Context, b buildInfo, spec rootfsSpec, arch string) ([]mutate.Addendum, error) {
	debs, npm, how, err := rootfsLayers(ctx, b, spec, arch)
	if err != nil {
		return nil, err
	}
	var adds []mutate.Addendum
	for i, entries := range [][]oci.Entry{debs, npm} {
		layer, err := oci.Layer(entries, b.Epoch)
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.Addendum{Layer: layer, History: v1.History{Created: v1.Time{Time: b.Epoch},
			CreatedBy: "cmp-injector hack/images: " + how[i], Comment: spec.Name}})
	}
	return adds, nil
}

// readRootfsPins are the labels' pins of spec (the Debian package named like
// the plugin's runtime, and the npm packages the tools' package.json names)
// and the npm packages' licences.
func readRootfsPins(root string, spec rootfsSpec) (map[string]string, []string, error) {
	pins := map[string]string{}
	debs, err := readDebianLock(filepath.Join(root, filepath.FromSlash(spec.Dir), "debian.lock"), platforms[0].Architecture)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range debs {
		if p.Package == "nodejs" {
			pins["node"] = "debian:nodejs=" + p.Version
		}
	}
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(spec.Dir), "tools", "package.json"))
	if err != nil {
		return nil, nil, err
	}
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(data, &pkg); err != nil {
		return nil, nil, fmt.Errorf("%s/tools/package.json: %w", spec.Dir, err)
	}
	for name, version := range pkg.Dependencies {
		pins[name] = "npm:" + name + "@" + version
	}
	licences, err := npmLicenses(root, spec)
	return pins, licences, err
}
