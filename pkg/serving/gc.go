package serving

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// A webhook's live heap is a few MiB, and Go's collector targets twice the
// live heap (GOGC=100, at least 4 MiB): under load it ran a collection every
// ~150 reviews, most of it fixed cost (stacks, the API types' globals), and
// with its assists it was a fifth of the injector's CPU. A higher target is
// safe only with a ceiling, so the memory limit follows the container's.
// Both give way to GOGC and GOMEMLIMIT, which the runtime reads itself.

// CgroupMemoryMax is the cgroup v2 file holding the container's memory limit.
const CgroupMemoryMax = "/sys/fs/cgroup/memory.max"

// memLimitShare is the part of the container's limit the heap may use before
// the collector works harder: the rest is stacks, buffers and the binary.
const memLimitShare = 0.9

// GCSettings is what TuneGC chose, for the start-up log.
type GCSettings struct {
	// GCPercent is the collector's target; "GOGC" when the environment set it.
	GCPercent string
	// MemoryLimit is the soft heap limit in bytes, 0 for none; "GOMEMLIMIT"
	// in Source when the environment set it.
	MemoryLimit int64
	Source      string
}

// TuneGC sets the collector's target to percent unless GOGC is set, and a
// soft memory limit of 90% of the container's (cgroupFile) unless GOMEMLIMIT
// is set or the container has no limit. percent <= 0 leaves the runtime's
// default.
func TuneGC(percent int, cgroupFile string) GCSettings {
	var s GCSettings
	switch {
	case os.Getenv("GOGC") != "":
		s.GCPercent = "GOGC=" + os.Getenv("GOGC")
	case percent > 0:
		debug.SetGCPercent(percent)
		s.GCPercent = strconv.Itoa(percent)
	default:
		s.GCPercent = "100"
		return s
	}
	if os.Getenv("GOMEMLIMIT") != "" {
		s.Source = "GOMEMLIMIT=" + os.Getenv("GOMEMLIMIT")
		return s
	}
	if limit, ok := cgroupLimit(cgroupFile); ok {
		s.MemoryLimit = int64(float64(limit) * memLimitShare)
		s.Source = cgroupFile
		debug.SetMemoryLimit(s.MemoryLimit)
	}
	return s
}

// cgroupLimit reads a memory.max: a byte count, or "max" for none.
func cgroupLimit(file string) (int64, bool) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}
