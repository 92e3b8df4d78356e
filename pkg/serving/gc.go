package serving

import (
	"os"
	"path/filepath"
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

// CgroupRoot is where a container sees its cgroup: the unified (v2)
// hierarchy itself, or on a cgroup v1 node the directory holding one mount per
// controller.
const CgroupRoot = "/sys/fs/cgroup"

// The memory limit's file under CgroupRoot. v2 nodes have memory.max; v1
// nodes (still common: older distributions, some managed node images) have
// memory/memory.limit_in_bytes instead. Reading only v2's left a v1 node's
// injector at GOGC 400 with no soft limit, free to grow a heap four times the
// live one into its container's hard limit.
const (
	cgroupV2MemoryMax   = "memory.max"
	cgroupV1MemoryLimit = "memory/memory.limit_in_bytes"
)

// cgroupV1Unlimited: v1 writes "no limit" as the largest int64 rounded down
// to the page size (9223372036854771712 with 4 KiB pages, less with larger
// pages), not as a word. No container has an exbibyte, so anything from 2^60
// on means none.
const cgroupV1Unlimited = int64(1) << 60

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
// soft memory limit of 90% of the container's (read under cgroupRoot, v2 or
// v1) unless GOMEMLIMIT is set or the container has no limit. percent <= 0
// leaves the runtime's default.
func TuneGC(percent int, cgroupRoot string) GCSettings {
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
	if limit, file := containerMemoryLimit(cgroupRoot); limit > 0 {
		s.MemoryLimit = int64(float64(limit) * memLimitShare)
		s.Source = file
		debug.SetMemoryLimit(s.MemoryLimit)
	}
	return s
}

// containerMemoryLimit is the container's memory limit in bytes and the file
// it came from, or 0 for none. v2's file decides when it exists, even when it
// says "max": a hybrid node may also mount a v1 memory hierarchy that is not
// the one limiting this container.
func containerMemoryLimit(root string) (int64, string) {
	v2 := filepath.Join(root, cgroupV2MemoryMax)
	if raw, err := os.ReadFile(v2); err == nil {
		if n, ok := parseLimit(raw); ok {
			return n, v2
		}
		return 0, ""
	}
	v1 := filepath.Join(root, cgroupV1MemoryLimit)
	raw, err := os.ReadFile(v1)
	if err != nil {
		return 0, ""
	}
	if n, ok := parseLimit(raw); ok && n < cgroupV1Unlimited {
		return n, v1
	}
	return 0, ""
}

// parseLimit reads a byte count; "max" (v2's none) and anything else that is
// not a positive number is no limit.
func parseLimit(raw []byte) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}
