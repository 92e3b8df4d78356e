package serving

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

// cgroupRoot makes a cgroup mount under t.TempDir() holding files (path
// relative to the root → content).
func cgroupRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	limited := cgroupRoot(t, map[string]string{cgroupV2MemoryMax: "268435456\n"})
	unlimited := cgroupRoot(t, map[string]string{cgroupV2MemoryMax: "max\n"})
	// A cgroup v1 node: the memory controller has its own hierarchy, and
	// "no limit" is the largest page-aligned int64, not a word.
	v1Limited := cgroupRoot(t, map[string]string{cgroupV1MemoryLimit: "268435456\n"})
	v1Unlimited := cgroupRoot(t, map[string]string{cgroupV1MemoryLimit: "9223372036854771712\n"})
	for _, tc := range []struct {
		name             string
		gogc, memlimit   string
		percent          int
		root             string
		wantPercent      int
		wantLimit        int64
		wantGC, wantFrom string
	}{
		{name: "defaults in a limited container", percent: 400, root: limited, wantPercent: 400, wantLimit: 241591910, wantGC: "400",
			wantFrom: filepath.Join(limited, cgroupV2MemoryMax)},
		{name: "no container limit", percent: 400, root: unlimited, wantPercent: 400, wantLimit: -1, wantGC: "400"},
		{name: "no cgroup files", percent: 400, root: t.TempDir(), wantPercent: 400, wantLimit: -1, wantGC: "400"},
		{name: "cgroup v1 limit", percent: 400, root: v1Limited, wantPercent: 400, wantLimit: 241591910, wantGC: "400",
			wantFrom: filepath.Join(v1Limited, cgroupV1MemoryLimit)},
		{name: "cgroup v1 without a limit", percent: 400, root: v1Unlimited, wantPercent: 400, wantLimit: -1, wantGC: "400"},
		{name: "GOGC wins", gogc: "150", percent: 400, root: limited, wantPercent: 100, wantLimit: 241591910, wantGC: "GOGC=150",
			wantFrom: filepath.Join(limited, cgroupV2MemoryMax)},
		{name: "GOMEMLIMIT wins", memlimit: "100MiB", percent: 400, root: limited, wantPercent: 400, wantLimit: -1, wantGC: "400", wantFrom: "GOMEMLIMIT=100MiB"},
		{name: "0 keeps the runtime's defaults", percent: 0, root: limited, wantPercent: 100, wantLimit: -1, wantGC: "100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			debug.SetMemoryLimit(math.MaxInt64)
			t.Setenv("GOGC", tc.gogc)
			t.Setenv("GOMEMLIMIT", tc.memlimit)
			s := TuneGC(tc.percent, tc.root)
			if got := debug.SetGCPercent(-2); got != tc.wantPercent {
				t.Errorf("GC percent %d, want %d", got, tc.wantPercent)
			}
			debug.SetGCPercent(100)
			limit := debug.SetMemoryLimit(-1)
			if tc.wantLimit < 0 && limit != math.MaxInt64 || tc.wantLimit >= 0 && limit != tc.wantLimit {
				t.Errorf("memory limit %d, want %d", limit, tc.wantLimit)
			}
			if s.GCPercent != tc.wantGC || s.Source != tc.wantFrom || (tc.wantLimit >= 0 && s.MemoryLimit != tc.wantLimit) {
				t.Errorf("settings %+v, want %s from %q", s, tc.wantGC, tc.wantFrom)
			}
		})
	}
}

// TestContainerMemoryLimit: v2's memory.max wins over v1's file when a
// hybrid node has both; values that mean "none" or that cannot be read are no
// limit.
func TestContainerMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name     string
		files    map[string]string
		want     int64
		wantFile string
	}{
		{"v2", map[string]string{cgroupV2MemoryMax: "1073741824\n"}, 1 << 30, cgroupV2MemoryMax},
		{"v2 max", map[string]string{cgroupV2MemoryMax: "max\n"}, 0, ""},
		{"v2 wins over v1", map[string]string{cgroupV2MemoryMax: "1073741824\n", cgroupV1MemoryLimit: "536870912\n"}, 1 << 30, cgroupV2MemoryMax},
		{"v2 says none: v1 is not asked", map[string]string{cgroupV2MemoryMax: "max\n", cgroupV1MemoryLimit: "536870912\n"}, 0, ""},
		{"v1", map[string]string{cgroupV1MemoryLimit: "536870912\n"}, 1 << 29, cgroupV1MemoryLimit},
		{"v1 unlimited (4 KiB pages)", map[string]string{cgroupV1MemoryLimit: "9223372036854771712\n"}, 0, ""},
		{"v1 unlimited (64 KiB pages)", map[string]string{cgroupV1MemoryLimit: "9223372036854710272\n"}, 0, ""},
		{"v1 garbage", map[string]string{cgroupV1MemoryLimit: "lots\n"}, 0, ""},
		{"v1 zero", map[string]string{cgroupV1MemoryLimit: "0\n"}, 0, ""},
		{"neither", nil, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := cgroupRoot(t, tc.files)
			got, file := containerMemoryLimit(root)
			wantFile := ""
			if tc.wantFile != "" {
				wantFile = filepath.Join(root, tc.wantFile)
			}
			if got != tc.want || file != wantFile {
				t.Errorf("containerMemoryLimit = %d from %q, want %d from %q", got, file, tc.want, wantFile)
			}
		})
	}
}
