package harness

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
)

// HostState is what the real node must leave as it found it: the host's
// kernel tunables (sysctl -a), firewall (iptables-save, ip6tables-save),
// network links (ip link) and mount table, as seen from the test process.
type HostState struct {
	Sysctls  map[string]string
	Firewall []string
	Links    []string
	Mounts   []string
}

// volatileSysctls are counters the kernel changes on its own (and other
// programs on a shared machine change by running): never the node's doing.
var volatileSysctls = regexp.MustCompile(`^(fs\.(dentry-state|file-nr|inode-nr|inode-state|aio-nr|quota\..*)|kernel\.(ns_last_pid|random\..*|pty\.nr)|net\.netfilter\.nf_conntrack_count)$`)

// Counters in iptables-save output, and its timestamped comment lines.
var iptablesCounters = regexp.MustCompile(`\[\d+:\d+\]`)

// SnapshotHost reads the host's state.
func SnapshotHost() (HostState, error) {
	s := HostState{Sysctls: map[string]string{}}
	out, err := exec.Command("sysctl", "-a").Output()
	if err != nil && len(out) == 0 {
		return s, fmt.Errorf("sysctl -a: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(line, " = ")
		if ok && !volatileSysctls.MatchString(k) {
			s.Sysctls[k] = v
		}
	}
	for _, cmd := range []string{"iptables-save", "ip6tables-save"} {
		out, err := exec.Command(cmd).Output()
		if err != nil {
			return s, fmt.Errorf("%s: %w", cmd, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if line != "" && !strings.HasPrefix(line, "#") {
				s.Firewall = append(s.Firewall, cmd+": "+iptablesCounters.ReplaceAllString(line, "[-]"))
			}
		}
	}
	out, err = exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		return s, fmt.Errorf("ip link: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		// "2: eth0: <FLAGS> ...": the name, without the index or the state.
		if f := strings.Fields(line); len(f) >= 2 {
			s.Links = append(s.Links, strings.TrimSuffix(f[1], ":"))
		}
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if ok && len(f) >= 5 && len(g) >= 2 {
			s.Mounts = append(s.Mounts, f[4]+" "+g[0]+" "+g[1])
		}
	}
	sort.Strings(s.Links)
	sort.Strings(s.Mounts)
	return s, nil
}

// Diff lists every difference between the state before (s) and after.
func (s HostState) Diff(after HostState) []string {
	var d []string
	keys := map[string]bool{}
	for k := range s.Sysctls {
		keys[k] = true
	}
	for k := range after.Sysctls {
		keys[k] = true
	}
	for k := range keys {
		if b, a := s.Sysctls[k], after.Sysctls[k]; a != b {
			d = append(d, fmt.Sprintf("sysctl %s: %q before, %q after", k, b, a))
		}
	}
	d = append(d, listDiff("firewall rule", s.Firewall, after.Firewall)...)
	d = append(d, listDiff("link", s.Links, after.Links)...)
	d = append(d, listDiff("mount", s.Mounts, after.Mounts)...)
	sort.Strings(d)
	return d
}

func listDiff(what string, before, after []string) []string {
	count := map[string]int{}
	for _, x := range before {
		count[x]++
	}
	for _, x := range after {
		count[x]--
	}
	var d []string
	for x, n := range count {
		switch {
		case n > 0:
			d = append(d, fmt.Sprintf("%s gone: %s", what, x))
		case n < 0:
			d = append(d, fmt.Sprintf("%s added: %s", what, x))
		}
	}
	return d
}
