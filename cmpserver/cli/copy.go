package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// copyCommand places this binary at DEST (the copy init container's job): written to a
// temp file next to DEST, made 0755 and renamed over DEST, so a sidecar never
// sees a half-written file.
func copyCommand(_ context.Context, args []string, stdio serving.IO) error {
	fs := serving.NewFlagSet("cmp-server copy", "DEST")
	dest, err := fs.ParseAction(args)
	if err != nil {
		return err
	}
	if dest == "" {
		return fs.Errorf("DEST is required")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := copyFile(self, dest); err != nil {
		return err
	}
	fmt.Fprintf(stdio.Stdout, "copied %s to %s (mode 0755)\n", self, dest)
	return nil
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
	if err := tmp.Chmod(0o755); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dest)
}
