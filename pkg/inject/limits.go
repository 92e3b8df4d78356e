package inject

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// Bounds on what a pod may ask for and on what a denial says. A denial is
// returned to the API server, shown to the user and logged: it must stay a few
// KB whatever the pod holds (an attack run turned a 526 KB plugins annotation
// of empty entries into a 30.8 MB denial that got the webhook OOM-killed).
const (
	// maxPluginsListed and maxPluginsAnnotationBytes bound the plugins
	// annotation; the reconciler's cache uses the same figures (pkg/keys).
	maxPluginsListed          = keys.MaxPluginsListed
	maxPluginsAnnotationBytes = keys.MaxPluginsAnnotationBytes
	// maxProblemsPerReason problems of one reason are listed; the rest are
	// counted.
	maxProblemsPerReason = 10
	// maxDenyMessageBytes bounds the whole denial message.
	maxDenyMessageBytes = 8 << 10
	// MaxQuotedBytes bounds a value from the pod quoted in a message
	// (pkg/policy quotes the same way).
	MaxQuotedBytes = 256
	// ProblemSeparator joins the problems of one denial.
	ProblemSeparator = "; "
)

// quoteBounded is %q of s, cut to MaxQuotedBytes (on a rune boundary) with the
// size of what was left out.
func quoteBounded(s string) string {
	if len(s) <= MaxQuotedBytes {
		return fmt.Sprintf("%q", s)
	}
	cut := MaxQuotedBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%q… (%d more bytes)", s[:cut], len(s)-cut)
}

// capProblems keeps the first maxProblemsPerReason problems of each reason, in
// order, and says per reason how many were left out.
func capProblems(problems []Problem) []Problem {
	count := map[Reason]int{}
	var kept []Problem
	var order []Reason
	for _, p := range problems {
		if count[p.Reason] == 0 {
			order = append(order, p.Reason)
		}
		count[p.Reason]++
		if count[p.Reason] <= maxProblemsPerReason {
			kept = append(kept, p)
		}
	}
	for _, r := range order {
		if n := count[r] - maxProblemsPerReason; n > 0 {
			kept = append(kept, Problem{Reason: r, Message: fmt.Sprintf("and %d more problems of kind %s", n, r)})
		}
	}
	return kept
}

// joinBounded joins messages with "; " and stops before maxDenyMessageBytes,
// saying how many messages were left out.
func joinBounded(prefix string, msgs []string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for i, m := range msgs {
		sep := ""
		if i > 0 {
			sep = ProblemSeparator
		}
		if b.Len()+len(sep)+len(m) > maxDenyMessageBytes-64 {
			fmt.Fprintf(&b, "%s… and %d more problems (message cut at %d bytes)", sep, len(msgs)-i, maxDenyMessageBytes)
			break
		}
		b.WriteString(sep)
		b.WriteString(m)
	}
	return b.String()
}
