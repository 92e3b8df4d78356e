package serving

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	dir := t.TempDir()
	limited := filepath.Join(dir, "limited")
	if err := os.WriteFile(limited, []byte("268435456\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unlimited := filepath.Join(dir, "unlimited")
	if err := os.WriteFile(unlimited, []byte("max\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name             string
		gogc, memlimit   string
		percent          int
		file             string
		wantPercent      int
		wantLimit        int64
		wantGC, wantFrom string
	}{
		{name: "defaults in a limited container", percent: 400, file: limited, wantPercent: 400, wantLimit: 241591910, wantGC: "400", wantFrom: limited},
		{name: "no container limit", percent: 400, file: unlimited, wantPercent: 400, wantLimit: -1, wantGC: "400"},
		{name: "no cgroup file", percent: 400, file: filepath.Join(dir, "absent"), wantPercent: 400, wantLimit: -1, wantGC: "400"},
		{name: "GOGC wins", gogc: "150", percent: 400, file: limited, wantPercent: 100, wantLimit: 241591910, wantGC: "GOGC=150", wantFrom: limited},
		{name: "GOMEMLIMIT wins", memlimit: "100MiB", percent: 400, file: limited, wantPercent: 400, wantLimit: -1, wantGC: "400", wantFrom: "GOMEMLIMIT=100MiB"},
		{name: "0 keeps the runtime's defaults", percent: 0, file: limited, wantPercent: 100, wantLimit: -1, wantGC: "100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			debug.SetMemoryLimit(math.MaxInt64)
			t.Setenv("GOGC", tc.gogc)
			t.Setenv("GOMEMLIMIT", tc.memlimit)
			s := TuneGC(tc.percent, tc.file)
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
