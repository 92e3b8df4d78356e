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

// CPUMs is the process's user and system CPU time and its waited-for
// children's (a plugin server's commands, a repo-server's git), in ms.
func CPUMs(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	var ticks float64
	for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime (fields 14-17)
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			return 0, err
		}
		ticks += v
	}
	return ticks * 1000 / clockTicks, nil
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

// ResetPeakRSS starts the process's VmHWM over from its current RSS (the
// kernel's clear_refs 5), so a later PeakRSSMiB is the peak of what came
// after: one round of a bench, not the start-up before it.
func ResetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}
