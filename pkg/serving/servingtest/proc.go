package servingtest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcField reads one "name: value [kB]" field of /proc/PID/FILE (status, io),
// kB values in bytes: VmHWM (peak RSS) of a server under test, wchar of the
// bytes it wrote.
func ProcField(pid int, file, name string) (int64, error) {
	path := fmt.Sprintf("/proc/%d/%s", pid, file)
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		rest, ok := strings.CutPrefix(line, name+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			break
		}
		v, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s in %s: %w", name, path, err)
		}
		if len(f) > 1 && f[1] == "kB" {
			v <<= 10
		}
		return v, nil
	}
	return 0, fmt.Errorf("no %s in %s", name, path)
}

// PeakRSSMiB is the process's high-water RSS (VmHWM) in MiB, 0 when unreadable
// (the process is gone): benchmarks print it, nothing asserts on it.
func PeakRSSMiB(pid int) float64 {
	v, err := ProcField(pid, "status", "VmHWM")
	if err != nil {
		return 0
	}
	return float64(v) / (1 << 20)
}

// ProcessAlive says whether pid runs and is not a zombie: a killed process
// stays in /proc until its parent reaps it.
func ProcessAlive(pid string) bool {
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}
