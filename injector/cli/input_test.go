package cli

import (
	"io"
	"strings"
	"testing"
)

// commentReader yields n bytes of YAML comment lines without holding them, so
// a test can offer input of any size.
type commentReader struct {
	n, read int64
}

func (r *commentReader) Read(p []byte) (int, error) {
	if r.read >= r.n {
		return 0, io.EOF
	}
	const line = "# padding padding padding padding padding padding padding padding\n"
	k := 0
	for k < len(p) && r.read < r.n {
		p[k] = line[r.read%int64(len(line))]
		k++
		r.read++
	}
	return k, nil
}

// TestOfflineCommandsCapTheirInput: inject and explain read input of any
// size (a 200 MB document took 1.73 / 1.93 GB). Input one byte over the cap
// adopt already had is refused with an error naming the limit, and no more
// than that is read.
func TestOfflineCommandsCapTheirInput(t *testing.T) {
	for _, cmd := range []string{"inject", "explain", "adopt"} {
		t.Run(cmd, func(t *testing.T) {
			args := []string{"--catalog", catalogFile}
			if cmd == "adopt" {
				args = []string{"-f", "-", "--out-dir", t.TempDir()}
			}
			in := &commentReader{n: maxInputBytes + 1}
			code, stderr := runCode(cmd, args, in, io.Discard)
			if code != 1 || !strings.Contains(stderr, "larger than the 64 MiB") {
				t.Errorf("%s of %d bytes: exit %d, stderr %q; want exit 1 naming the 64 MiB limit", cmd, in.n, code, stderr)
			}
			if in.read > maxInputBytes+1 {
				t.Errorf("%s read %d bytes, more than the cap and one", cmd, in.read)
			}
		})
	}
}
