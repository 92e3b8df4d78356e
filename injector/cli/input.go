package cli

import (
	"fmt"
	"io"
	"os"
)

// maxInputBytes bounds what adopt, inject and explain read. Their inputs are
// manifests: argo-helm's whole render is a few hundred KiB. Parsing holds
// several times the input in memory (a 200 MB document took inject 1.73 GB,
// explain 1.93 GB before this cap), so a bigger input is refused, not read.
const maxInputBytes = 64 << 20

// readInput reads the file name ("-": stdin) of the command cmd, refusing
// more than maxInputBytes with an error that names the limit.
func readInput(cmd, name string, stdin io.Reader) ([]byte, error) {
	r, what := stdin, "stdin"
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r, what = f, name
	}
	// One byte more than the cap tells "at the cap" from "over it" without
	// reading the rest.
	data, err := io.ReadAll(io.LimitReader(r, maxInputBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if len(data) > maxInputBytes {
		return nil, fmt.Errorf("%s: larger than the %d MiB input limit of %s; split the input and run it once per part", what, maxInputBytes>>20, cmd)
	}
	return data, nil
}
