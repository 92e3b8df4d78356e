package helmplugin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// errMissing marks a path inside the repository that does not exist.
var errMissing = errors.New("does not exist")

// boundary resolves user supplied paths against the app dir while keeping them
// inside the repository root.
type boundary struct {
	appDir string // absolute, symlinks resolved
	root   string // absolute, symlinks resolved
	// rootAsGiven is the absolute root before resolving symlinks, so that an absolute
	// path written through a symlinked root (/tmp -> /private/tmp) is still accepted.
	rootAsGiven string
}

func newBoundary(appDir, repoRoot string) (*boundary, error) {
	if repoRoot == "" {
		repoRoot = appDir
	}
	app, err := realDir(appDir)
	if err != nil {
		return nil, fmt.Errorf("app dir: %w", err)
	}
	root, err := realDir(repoRoot)
	if err != nil {
		return nil, fmt.Errorf("repository root: %w", err)
	}
	if !within(root, app) {
		return nil, fmt.Errorf("app dir %s is not inside the repository root %s", app, root)
	}
	given, err := filepath.Abs(repoRoot)
	if err != nil {
		return nil, err
	}
	return &boundary{appDir: app, root: root, rootAsGiven: given}, nil
}

func realDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(real)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", fmt.Errorf("%s is not a directory", dir)
	}
	return real, nil
}

// within reports whether path is root or below it; both must be clean and absolute.
func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// resolve returns the real path of a file named by the user, relative to the app
// dir. The path must stay inside the repository both as written and after following
// symlinks; a path that does not exist yields an error wrapping errMissing.
func (b *boundary) resolve(what, p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("%s: empty path", what)
	}
	if strings.Contains(p, "://") {
		return "", fmt.Errorf("%s %q: remote files are not supported; commit the file to the repository", what, p)
	}
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("%s %q: path contains a NUL byte", what, p)
	}
	joined := p
	if !filepath.IsAbs(p) {
		joined = filepath.Join(b.appDir, p)
	}
	joined = filepath.Clean(joined)
	if !within(b.root, joined) && !within(b.rootAsGiven, joined) {
		return "", fmt.Errorf("%s %q is outside the repository: paths must stay inside %s", what, p, b.root)
	}
	real, err := filepath.EvalSymlinks(joined)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s %q: %w", what, p, errMissing)
	}
	if err != nil {
		return "", fmt.Errorf("%s %q: %w", what, p, err)
	}
	if !within(b.root, real) {
		return "", fmt.Errorf("%s %q is outside the repository: it is a symlink to %s", what, p, real)
	}
	st, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("%s %q: %w", what, p, err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s %q is not a regular file", what, p)
	}
	return real, nil
}

// checkSymlinks refuses a chart that holds a symlink leading outside the repository:
// helm follows symlinks when it loads a chart, so such a link would let a template
// read (.Files.Get) or render files of the sidecar. Dangling links are judged by
// where they point.
func (b *boundary) checkSymlinks() error {
	return filepath.WalkDir(b.appDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		rel, _ := filepath.Rel(b.appDir, p)
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		real, err := filepath.EvalSymlinks(p)
		switch {
		case err == nil:
			target = real
		case errors.Is(err, fs.ErrNotExist):
			target = filepath.Clean(target)
		default:
			return fmt.Errorf("chart file %s: %w", rel, err)
		}
		if !within(b.root, target) && !within(b.rootAsGiven, target) {
			return fmt.Errorf("chart file %s is a symlink to %s, outside the repository", rel, target)
		}
		return nil
	})
}

// rootFromSourcePath finds the repository root without help from the plugin server:
// the server runs commands in <root>/<spec.source.path>, and Argo CD sends that path
// as ARGOCD_APP_SOURCE_PATH, so when the app dir ends with it the root is what comes
// before. Anything else (no path, "..", no match) leaves the app dir as the boundary.
func rootFromSourcePath(appDir, sourcePath string) string {
	rel := filepath.Clean(strings.Trim(sourcePath, "/"))
	if rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return ""
	}
	abs, err := filepath.Abs(appDir)
	if err != nil {
		return ""
	}
	root, ok := strings.CutSuffix(abs, string(filepath.Separator)+rel)
	if !ok || root == "" {
		return ""
	}
	return root
}
