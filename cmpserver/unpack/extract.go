package unpack

import (
	"archive/tar"
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/klauspost/compress/gzip"

	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// Limits bound what one request may unpack. Argo CD has none; a repository
// tarball is untrusted input, so we stop early with an error that names the limit.
// A zero field means no limit; DefaultLimits are serve's.
type Limits struct {
	// MaxCompressedBytes caps the .tar.gz stream as received.
	MaxCompressedBytes int64
	// MaxExtractedBytes caps the sum of regular file sizes.
	MaxExtractedBytes int64
	// MaxFiles caps the number of tar entries of any type.
	MaxFiles int
}

// Problems names each limit that cannot work, by its flag (nil entries
// for those that can; errors.Join leaves them out).
func (l Limits) Problems() []error {
	return []error{
		serving.NotNegative("max-compressed-bytes", l.MaxCompressedBytes),
		serving.NotNegative("max-extracted-bytes", l.MaxExtractedBytes),
		serving.NotNegative("max-files", l.MaxFiles),
	}
}

// DefaultLimits fit a large monorepo including its .git directory.
func DefaultLimits() Limits {
	return Limits{MaxCompressedBytes: 1 << 30, MaxExtractedBytes: 4 << 30, MaxFiles: 1_000_000}
}

// extractor unpacks one repository tarball into dest. Entries may only be regular
// files, directories and symlinks (what Argo CD's client sends); names must be
// relative without "..", no entry may be written through a symlink, and every
// symlink must resolve inside dest.
type extractor struct {
	dest         string
	limits       Limits
	preserveMode bool
	readOnly     bool
	namesOnly    bool
	settled      func(rel string) bool // see extractOptions.settled

	// gate, if set, is called before a file is written with the declared
	// size of all files so far, that one included; an error ends the extraction.
	gate func(total int64) error

	files    int
	bytes    int64
	realDirs map[string]bool // relative dirs known to be real directories
	// written holds the files and symlinks extracted so far: dest starts
	// empty, so any other name does not exist yet and needs no lstat.
	written  map[string]bool
	symlinks []string     // relative symlink paths, re-checked at the end
	buf      []byte       // file contents pass through it, one write per file up to its size
	writers  *fileWriters // small files are written on other cores (nil: inline)
	stats    extractStats
	// linkSteps bounds the work of resolving the links (maxSymlinkSteps).
	linkSteps int
}

// barrier waits for every queued file to be written.
func (x *extractor) barrier() error {
	if x.writers == nil {
		return nil
	}
	return x.writers.barrier()
}

// copyBuf is the extractor's buffer: most repository files fit, so each costs
// one write; bigger ones are copied through it.
//
// It and readAhead are held by every stream being unpacked, 20 at a time in an
// application controller's refresh (its status processors). At 256 KiB each
// they were most of the server's heap under that load; at 64 KiB a bigger
// file or a read costs a few more syscalls (of 64 KiB each) and the single
// request is as fast (docs/performance.md, "Memory under 20 concurrent streams").
const copyBuf = 64 << 10

// readAhead is how much the decompressor reads at once: the stdlib's default
// is 4 KiB, i.e. a read (and, on the spool, a lock) every 4 KiB.
const readAhead = 64 << 10

// extractTgz unpacks the gzip-compressed tar r into dest, which must exist.
func extractTgz(r io.Reader, dest string, limits Limits, preserveMode bool) error {
	return extractTgzWith(r, dest, extractOptions{limits: limits, preserveMode: preserveMode})
}

// extractOptions are extractTgzWith's.
type extractOptions struct {
	limits       Limits
	preserveMode bool
	// readOnly creates files without write permission and takes it from every
	// directory once the tree is complete (a tree shared between requests).
	readOnly bool
	// namesOnly writes every regular file empty: the tree has every path,
	// type, mode and link of the tarball but no content, which is all a
	// discovery rule by file name or glob reads (see Target.NamesOnly).
	// Limits count the declared sizes as if written.
	namesOnly bool
	// settled, with namesOnly, ends the extraction without error once it
	// reports that the tree so far gives the answer (Target.Settled).
	settled func(rel string) bool
	gate    func(int64) error // see extractor.gate
	// stats, if set, is given the extraction's counts (the entries for the
	// request's trace; the link work for tests).
	stats *extractStats
	// linkSteps replaces maxSymlinkSteps when > 0 (tests).
	linkSteps int
	// budget replaces the writers' queuedBytes when set (tests).
	budget *byteBudget
}

// extractStats counts the entries unpacked and the work of resolving
// symlinks, which tests bound.
type extractStats struct {
	files     int  // tar entries read
	settled   bool // extractOptions.settled ended the extraction
	linkSteps int  // path components walked and links followed
	lstats    int  // Lstat calls made to resolve links
}

// extractTgzWith is extractTgz with options.
func extractTgzWith(r io.Reader, dest string, o extractOptions) error {
	limits, preserveMode, gate := o.limits, o.preserveMode, o.gate
	gz, err := gzip.NewReader(bufio.NewReaderSize(r, readAhead))
	if err != nil {
		return fmt.Errorf("error reading repository tarball: %w", err)
	}
	defer gz.Close()
	x := &extractor{dest: dest, limits: limits, preserveMode: preserveMode, gate: gate,
		realDirs: map[string]bool{".": true}, written: map[string]bool{}}
	if !o.namesOnly {
		// A names-only tree writes no content: no copy buffer, no writers.
		x.buf, x.writers = make([]byte, copyBuf), startWriters()
		if x.writers != nil && o.budget != nil {
			x.writers.budget = o.budget
		}
	}
	if x.writers != nil {
		// Every return waits for the writers: the caller may remove dest next.
		defer x.writers.close()
	}
	x.readOnly, x.namesOnly = o.readOnly, o.namesOnly
	if o.namesOnly {
		// Only a names-only tree is for an answer read from names; a tree
		// a command runs on is always complete.
		x.settled = o.settled
	}
	x.linkSteps = cmp.Or(o.linkSteps, maxSymlinkSteps)
	if o.stats != nil {
		defer func() { x.stats.files = x.files; *o.stats = x.stats }()
	}
	if err := x.run(gz); err != nil {
		return err
	}
	if x.writers != nil {
		if err := x.writers.close(); err != nil {
			return err
		}
	}
	if x.readOnly {
		return x.freezeDirs()
	}
	return nil
}

// freezeDirs takes write permission from every directory of the tree, the
// deepest first (see MakeWritable for the way back).
func (x *extractor) freezeDirs() error {
	dirs := make([]string, 0, len(x.realDirs))
	for rel := range x.realDirs {
		dirs = append(dirs, rel)
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	for _, rel := range dirs {
		abs := filepath.Join(x.dest, rel)
		fi, err := os.Lstat(abs)
		if err != nil {
			return fmt.Errorf("error extracting %q: %w", filepath.ToSlash(rel), err)
		}
		if err := os.Chmod(abs, fi.Mode().Perm()&^0o222); err != nil {
			return fmt.Errorf("error extracting %q: %w", filepath.ToSlash(rel), err)
		}
	}
	return nil
}

// MakeWritable gives the owner write permission on every directory under
// root again, so that a frozen tree (or what a crash left of one) can be removed.
func MakeWritable(root string) {
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			if fi, err := d.Info(); err == nil && fi.Mode().Perm()&0o200 == 0 {
				_ = os.Chmod(p, fi.Mode().Perm()|0o700)
			}
		}
		return nil
	})
}

func (x *extractor) run(gz io.Reader) error {
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("error reading repository tarball: %w", err)
		}
		if err := x.entry(hdr, tr); err != nil {
			if errors.Is(err, errSettled) {
				// No symlink so far (entry), so there is no link to resolve.
				x.stats.settled = true
				return nil
			}
			return err
		}
	}
	if err := x.barrier(); err != nil {
		return err
	}
	// A symlink that was harmless when created can be made to escape by a later
	// entry (e.g. a dangling component that becomes a link), so links are
	// resolved against the finished tree only, where each is resolved once
	// (links.go).
	lr := newLinkResolver(x.dest, x.realDirs, len(x.symlinks), x.linkSteps)
	defer func() { x.stats.linkSteps, x.stats.lstats = lr.steps, lr.lstats }()
	for _, rel := range x.symlinks {
		if err := lr.check(rel); err != nil {
			return err
		}
	}
	return nil
}

// checkTgzLimits reads a gzip-compressed tar and checks the entry count and the
// declared sizes of its files against limits, writing nothing, so that a
// tarball over a limit is refused before extraction starts instead of after
// the limit's worth of files (4 GiB by default) has been written. Only a limit
// is reported; a damaged stream is left for the extraction to report.
func checkTgzLimits(r io.Reader, limits Limits) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil
	}
	defer gz.Close()
	tr := tar.NewReader(gz)
	var files int
	var size int64
	for {
		hdr, err := tr.Next()
		if err != nil {
			return nil
		}
		files++
		if err := checkEntryLimits(limits, files, size, hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg || hdr.Typeflag == tar.TypeRegA { //nolint:staticcheck // old writers still mark files TypeRegA
			size += hdr.Size
		}
	}
}

// checkEntryLimits checks the files-th entry hdr against limits, size being
// the sum of the file sizes before it, before anything of it is written.
func checkEntryLimits(limits Limits, files int, size int64, hdr *tar.Header) error {
	if limits.MaxFiles > 0 && files > limits.MaxFiles {
		return limitError(fmt.Sprintf("repository tarball has more than %d entries (limit --max-files)", limits.MaxFiles))
	}
	if hdr.Typeflag != tar.TypeReg && hdr.Typeflag != tar.TypeRegA { //nolint:staticcheck // old writers still mark files TypeRegA; Argo CD reads them
		return nil
	}
	if hdr.Size < 0 || (limits.MaxExtractedBytes > 0 && size+hdr.Size > limits.MaxExtractedBytes) {
		return limitError(fmt.Sprintf("repository tarball expands to more than %d bytes (limit --max-extracted-bytes)", limits.MaxExtractedBytes))
	}
	return nil
}

// limitError is a tarball refused for one of Limits: the stream is refused at
// once, without reading it to the end.
type limitError string

func (e limitError) Error() string { return string(e) }

func isLimit(err error) bool {
	var le limitError
	return errors.As(err, &le)
}

func (x *extractor) entry(hdr *tar.Header, body io.Reader) error {
	x.files++
	if err := checkEntryLimits(x.limits, x.files, x.bytes, hdr); err != nil {
		return err
	}
	rel, skip, err := entryName(hdr.Name)
	if err != nil || skip {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		err = x.mkdir(rel, x.mode(hdr, 0o755)|0o700)
	case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // old writers still mark files TypeRegA; Argo CD reads them
		err = x.writeFile(rel, hdr, body)
	case tar.TypeSymlink:
		return x.symlink(rel, hdr.Linkname)
	default:
		return fmt.Errorf("illegal entry in archive: %q has unsupported type %q (only files, directories and symlinks are allowed)", hdr.Name, hdr.Typeflag)
	}
	if err == nil && x.settled != nil && len(x.symlinks) == 0 && x.settled(rel) {
		// Without links, later entries only add names (a duplicate replaces
		// a file, never removes one), so the answer cannot change.
		return errSettled
	}
	return err
}

// errSettled ends an extraction whose settled reported the answer found.
var errSettled = errors.New("the tree so far gives the answer")

// entryName validates a tar entry name and returns it cleaned and slash-free of
// leading "./". The root entry "." is skipped.
func entryName(name string) (rel string, skip bool, err error) {
	if name == "" {
		return "", false, errors.New("illegal filepath in archive: empty name")
	}
	if strings.HasPrefix(name, "/") || filepath.IsAbs(name) {
		return "", false, fmt.Errorf("illegal filepath in archive: %q is absolute", name)
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", false, fmt.Errorf("illegal filepath in archive: %q contains ..", name) //nolint:staticcheck // Argo CD's text, to the letter
		}
	}
	if strings.ContainsRune(name, 0) {
		return "", false, fmt.Errorf("illegal filepath in archive: %q contains NUL", name)
	}
	rel = filepath.Clean(filepath.FromSlash(name))
	return rel, rel == ".", nil
}

func (x *extractor) mode(hdr *tar.Header, def fs.FileMode) fs.FileMode {
	m := def
	if x.preserveMode {
		m = fs.FileMode(hdr.Mode) & fs.ModePerm
	}
	if x.readOnly && hdr.Typeflag != tar.TypeDir {
		m &^= 0o222
	}
	return m
}

// ensureDir makes rel a real directory, creating missing parents; it fails if any
// component already exists as a symlink or a file, so nothing is written through a
// link.
func (x *extractor) ensureDir(rel string, mode fs.FileMode) error {
	if x.realDirs[rel] {
		return nil
	}
	if err := x.ensureDir(filepath.Dir(rel), 0o755); err != nil {
		return err
	}
	if x.written[rel] {
		// A file of that name may still be queued: let it land, so that
		// the lstat below sees it and refuses.
		if err := x.barrier(); err != nil {
			return err
		}
	}
	abs := filepath.Join(x.dest, rel)
	fi, err := os.Lstat(abs)
	switch {
	case err == nil && fi.IsDir():
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("illegal filepath in archive: %q is a symlink and cannot contain entries", filepath.ToSlash(rel))
	case err == nil:
		return fmt.Errorf("illegal filepath in archive: %q is a file and cannot contain entries", filepath.ToSlash(rel))
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Mkdir(abs, mode); err != nil {
			return fmt.Errorf("error extracting %q: %w", filepath.ToSlash(rel), err)
		}
	default:
		return fmt.Errorf("error extracting %q: %w", filepath.ToSlash(rel), err)
	}
	x.realDirs[rel] = true
	return nil
}

func (x *extractor) mkdir(rel string, mode fs.FileMode) error {
	if err := x.ensureDir(rel, mode); err != nil {
		return err
	}
	// The directory may have been created as a parent first; apply its own mode.
	return os.Chmod(filepath.Join(x.dest, rel), mode)
}

// clearTarget prepares rel for a new file or link: its parent must be a real
// directory, and an earlier entry of the same name (tar allows duplicates) is
// replaced unless it is a directory.
func (x *extractor) clearTarget(rel string) (string, error) {
	if err := x.ensureDir(filepath.Dir(rel), 0o755); err != nil {
		return "", err
	}
	abs := filepath.Join(x.dest, rel)
	if x.realDirs[rel] {
		return "", fmt.Errorf("illegal filepath in archive: %q is already a directory", filepath.ToSlash(rel))
	}
	if x.written[rel] {
		if err := x.barrier(); err != nil {
			return "", err
		}
		if err := os.Remove(abs); err != nil {
			return "", fmt.Errorf("error extracting %q: %w", filepath.ToSlash(rel), err)
		}
	}
	x.written[rel] = true
	return abs, nil
}

func (x *extractor) writeFile(rel string, hdr *tar.Header, body io.Reader) error {
	if x.gate != nil {
		if err := x.gate(x.bytes + hdr.Size); err != nil {
			return err
		}
	}
	abs, err := x.clearTarget(rel)
	if err != nil {
		return err
	}
	if x.namesOnly {
		// An empty file made as a writer makes any (the tar reader skips
		// the content at the next header).
		x.bytes += hdr.Size
		var none []byte
		return writeJob{abs: abs, name: hdr.Name, mode: x.mode(hdr, 0o644), chmod: x.preserveMode, buf: &none}.write()
	}
	if x.writers != nil && hdr.Size <= parallelMax {
		n, queued, err := x.writers.submit(abs, hdr.Name, x.mode(hdr, 0o644), x.preserveMode, body, int(hdr.Size))
		if queued {
			x.bytes += int64(n)
			return err
		}
	}
	// O_EXCL: never follow whatever might sit at the final component.
	f, err := os.OpenFile(abs, os.O_WRONLY|os.O_CREATE|os.O_EXCL, x.mode(hdr, 0o644))
	if err != nil {
		return fmt.Errorf("error extracting %q: %w", hdr.Name, err)
	}
	n, err := x.copy(f, body, hdr.Size)
	x.bytes += n
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("error extracting %q: %w", hdr.Name, err)
	}
	if x.preserveMode {
		// The umask may have narrowed the mode given to OpenFile.
		return os.Chmod(abs, x.mode(hdr, 0o644))
	}
	return nil
}

// copy writes size bytes of body to f through x.buf: one write for a file that
// fits. (io.Copy would go through os.File.ReadFrom, which allocates 32 KiB per
// file and writes every 32 KiB.)
func (x *extractor) copy(f *os.File, body io.Reader, size int64) (int64, error) {
	var done int64
	for done < size {
		n, err := io.ReadFull(body, x.buf[:min(int64(len(x.buf)), size-done)])
		if n > 0 {
			w, werr := f.Write(x.buf[:n])
			done += int64(w)
			if werr != nil {
				return done, werr
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return done, err
		}
	}
	return done, nil
}

func (x *extractor) symlink(rel, target string) error {
	if target == "" {
		return fmt.Errorf("illegal filepath in symlink: %q has an empty target", filepath.ToSlash(rel))
	}
	// Lexical check first, with Argo CD's message.
	resolved := target
	if !filepath.IsAbs(target) {
		resolved = filepath.Join(x.dest, filepath.Dir(rel), target)
	}
	if !Inside(x.dest, resolved) {
		return fmt.Errorf("illegal filepath in symlink: %q -> %q points outside the repository", filepath.ToSlash(rel), target)
	}
	linkTarget, err := filepath.Rel(filepath.Join(x.dest, filepath.Dir(rel)), resolved)
	if err != nil {
		return fmt.Errorf("illegal filepath in symlink: %q: %w", filepath.ToSlash(rel), err)
	}
	abs, err := x.clearTarget(rel)
	if err != nil {
		return err
	}
	if err := os.Symlink(linkTarget, abs); err != nil {
		return fmt.Errorf("error extracting %q: %w", filepath.ToSlash(rel), err)
	}
	// Where the link finally leads is checked once the tree is complete
	// (run): until then a later entry can change it, and resolving every
	// link as it arrives cost each one its whole chain again.
	x.symlinks = append(x.symlinks, rel)
	return nil
}

func splitPath(p string) []string {
	return strings.Split(filepath.ToSlash(filepath.Clean(p)), "/")
}

// Inside reports whether path is dir or below it, lexically.
func Inside(dir, path string) bool {
	rel, err := filepath.Rel(dir, filepath.Clean(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}
