package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
)

const adoptCases = "../../pkg/adopt/testdata/golden/"

// TestAdoptCommand: the files adopt writes load (the catalog through the
// real loader), the report goes to stdout, and the exit code says whether
// something essential was lost.
func TestAdoptCommand(t *testing.T) {
	for _, tc := range []struct {
		input string
		code  int
		stdin bool
	}{
		{input: "argo-helm", code: 0},
		{input: "operator", code: 0, stdin: true},
		{input: "vault-plugin-sidecar", code: 1},
	} {
		t.Run(tc.input, func(t *testing.T) {
			in := filepath.Join(adoptCases, tc.input, "input.yaml")
			out := t.TempDir()
			args := []string{"-f", in, "--out-dir", out, "--copy-image", "ghcr.io/cmp-injector/cmp-server:v0.1.0"}
			var stdin *os.File
			if tc.stdin {
				f, err := os.Open(in)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				stdin, args[1] = f, "-"
			}
			var stdout bytes.Buffer
			code, stderr := runCode("adopt", args, stdin, &stdout)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.code, stderr)
			}
			if _, err := catalog.Load(filepath.Join(out, "catalog.yaml")); err != nil {
				t.Errorf("catalog.yaml: %v", err)
			}
			want, err := os.ReadFile(filepath.Join(adoptCases, tc.input, "workload.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(filepath.Join(out, "workload.yaml")); !bytes.Equal(got, want) {
				t.Errorf("workload.yaml differs from the golden one")
			}
			report, err := os.ReadFile(filepath.Join(adoptCases, tc.input, "report.txt"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(report), stdout.String()) {
				t.Errorf("stdout is not the golden report:\n%s", stdout.String())
			}
		})
	}
}

func TestAdoptCommandUsage(t *testing.T) {
	if code, _ := runCode("adopt", []string{"-f", "x.yaml"}, nil, &bytes.Buffer{}); code != 2 {
		t.Errorf("without --out-dir: exit %d, want 2", code)
	}
	if code, _ := runCode("adopt", []string{"-f", "/nonexistent", "--out-dir", t.TempDir()}, nil, &bytes.Buffer{}); code != 1 {
		t.Errorf("unreadable input: exit %d, want 1", code)
	}
}
