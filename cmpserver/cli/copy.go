package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Copy places this binary at DEST (the copy init container's job): written to a
// temp file next to DEST, made 0755 and renamed over DEST, so a sidecar never
// sees a half-written file.
func Copy(_ context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 || args[0] == "" || args[0][0] == '-' {
		fmt.Fprintln(stderr, "Usage: cmp-server copy DEST")
		return 2
	}
	dest := args[0]
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "copy:", err)
		return 1
	}
	if err := copyFile(self, dest); err != nil {
		fmt.Fprintln(stderr, "copy:", err)
		return 1
	}
	fmt.Fprintf(stdout, "copied %s to %s (mode 0755)\n", self, dest)
	return 0
}

func copyFile(src, dest string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = io.Copy(tmp, in); err != nil {
		return err
	}
	if err = tmp.Chmod(0o755); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dest)
}
