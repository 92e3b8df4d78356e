package adopt

import (
	"fmt"
	"io"
	"strings"
)

// WriteReport writes the report an admin reads: what was adopted and
// removed, then every finding (essential first) with what to do, then the
// verdict. It decides nothing; Lost does.
func (r *Result) WriteReport(w io.Writer) error {
	var b strings.Builder
	for _, p := range r.Plugins {
		fmt.Fprintf(&b, "adopted %s from %s (%s)\n", p.Name, p.Object, p.Container)
	}
	for _, rm := range r.Removed {
		var parts []string
		add := func(what string, names []string) {
			if len(names) > 0 {
				parts = append(parts, what+" "+strings.Join(names, ", "))
			}
		}
		add("containers", rm.Containers)
		add("init containers", rm.InitContainers)
		add("volumes", rm.Volumes)
		add("keys", rm.Keys)
		if len(parts) > 0 {
			fmt.Fprintf(&b, "removed from %s: %s\n", rm.Object, strings.Join(parts, "; "))
		}
	}
	for _, f := range r.Findings {
		where := f.Object
		if f.Plugin != "" {
			where = strings.TrimSpace(where + " plugin " + f.Plugin)
		}
		if where != "" {
			where += ": "
		}
		fmt.Fprintf(&b, "%s [%s] %s%s\n", f.Severity, f.Code, where, f.Message)
		if f.Action != "" {
			fmt.Fprintf(&b, "    what to do: %s\n", f.Action)
		}
	}
	if n := r.count(Essential); n > 0 {
		fmt.Fprintf(&b, "%d essential finding(s): the adopted plugins will not work as the hand-written ones did until you act on them\n", n)
	} else {
		fmt.Fprintf(&b, "nothing essential lost (%d warning(s), %d note(s))\n", r.count(Warning), r.count(Info))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (r *Result) count(s Severity) int {
	n := 0
	for _, f := range r.Findings {
		if f.Severity == s {
			n++
		}
	}
	return n
}
