package main

import (
	"archive/tar"
	"bufio"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
)

// An unpack floor is the least work any plugin server does with a repository
// stream, done by a pinned child of this bench on the tarball Argo CD's client
// would send: no gRPC, no plugin command, no response. Its CPU is a floor for
// a server's: every server must verify, inflate, write and later remove the
// same tree.
type unpackFloor struct {
	name string
	// argv runs one unpack of TARBALL into DIR and removes DIR.
	argv []string
}

const unpackFloorNote = `  (unpack floors, in the same rounds, pinned like the servers, on the tarball the client sends, with nothing
   received over gRPC and no plugin run: floor-go is this bench's plain Go unpack (SHA-256, klauspost inflate,
   archive/tar, one file at a time, then removing the tree); floor-tar is GNU tar -xzf and rm -rf. Their rest ms
   is the unpack's wall time)`

func unpackFloors(self string) []unpackFloor {
	floors := []unpackFloor{{"floor-go", []string{self, "unpack", "--tarball", "TARBALL", "--dir", "DIR"}}}
	if _, err := exec.LookPath("tar"); err == nil {
		if _, err := exec.LookPath("gzip"); err == nil {
			floors = append(floors, unpackFloor{"floor-tar", []string{"sh", "-c", `mkdir "$1" && tar -xzf "$0" -C "$1" && rm -rf "$1"`, "TARBALL", "DIR"}})
		}
	}
	return floors
}

// run unpacks once, pinned to the server CPU, and returns the wall time and
// the CPU time (the child's and its children's, which wait4 reports). Not the
// peak RSS: wait4's counts the forking bench's own, which a child keeps
// across exec.
func (f unpackFloor) run(tarball, dir string) (wallMs, cpuMs float64, err error) {
	argv := make([]string, len(f.argv))
	for i, a := range f.argv {
		argv[i] = strings.NewReplacer("TARBALL", tarball, "DIR", dir).Replace(a)
	}
	argv = pinned(1, argv...)
	cmd := exec.Command(argv[0], argv[1:]...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	wall := time.Since(start)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w\n%s", f.name, err, tail(string(out), 2000))
	}
	st := cmd.ProcessState
	return float64(wall.Microseconds()) / 1000, float64((st.UserTime() + st.SystemTime()).Microseconds()) / 1000, nil
}

// unpackMain is floor-go: one unpack of --tarball into --dir (which must not
// exist), then the tree's removal.
func unpackMain(args []string) error {
	fs := flag.NewFlagSet("unpack", flag.ContinueOnError)
	tarball := fs.String("tarball", "", "the .tar.gz")
	dir := fs.String("dir", "", "where to unpack it (created, then removed)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *tarball == "" || *dir == "" {
		return errors.New("unpack: --tarball and --dir are required")
	}
	if err := unpackTree(*tarball, *dir); err != nil {
		return err
	}
	return os.RemoveAll(*dir)
}

// unpackTree hashes the stream as a server must (the bench made the tarball,
// so there is no checksum to compare with) and writes the tree into dir,
// which it creates.
func unpackTree(tarball, dir string) error {
	f, err := os.Open(tarball)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	hash := sha256.New()
	gz, err := gzip.NewReader(io.TeeReader(bufio.NewReaderSize(f, 64<<10), hash))
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	buf := make([]byte, 64<<10)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			err = writeFile(p, tr, buf, os.FileMode(h.Mode)&0o777)
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, p)
		}
		if err != nil {
			return err
		}
	}
	// The rest of the stream (gzip's trailer) belongs to the checksum too.
	if _, err := io.Copy(io.Discard, gz); err != nil {
		return err
	}
	_ = hash.Sum(nil)
	return nil
}

func writeFile(p string, r io.Reader, buf []byte, mode os.FileMode) error {
	out, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	// Hiding the file's ReadFrom keeps the one buffer for every file.
	if _, err := io.CopyBuffer(struct{ io.Writer }{out}, r, buf); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
