package unpack

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/cmpserver/unpack/tartest"
)

// fanOutTgz is issue 37's item 8 in small: a chain of depth links (l1 -> end,
// l2 -> l1, ...) and fan links fan/i, each pointing at the chain's last
// link, so that each of them resolves through the whole chain.
func fanOutTgz(t testing.TB, depth, fan int) []byte {
	t.Helper()
	entries := []tartest.Entry{tartest.File("end", "x"), tartest.Symlink("l1", "end")}
	for i := 2; i <= depth; i++ {
		entries = append(entries, tartest.Symlink(fmt.Sprintf("l%d", i), fmt.Sprintf("l%d", i-1)))
	}
	entries = append(entries, tartest.Dir("fan"))
	for i := range fan {
		entries = append(entries, tartest.Symlink(fmt.Sprintf("fan/%d", i), fmt.Sprintf("../l%d", depth)))
	}
	return tartest.Tgz(t, entries...)
}

// Each link is resolved once: the work of checking a tree's links follows
// the number of links, not links × chain depth (before: about 160 steps per
// fan link, 20,000 of them taking seconds; the 999,000 took 9 min).
func TestSymlinkFanOutResolvesEachLinkOnce(t *testing.T) {
	const depth, fan = 39, 20_000 // 39 + the fan link: the 40 hops allowed
	tgz := fanOutTgz(t, depth, fan)
	var stats extractStats
	start := time.Now()
	if err := extractTgzWith(bytes.NewReader(tgz), t.TempDir(), extractOptions{limits: DefaultLimits(), stats: &stats}); err != nil {
		t.Fatal(err)
	}
	links := depth + fan
	// The time is only reported: most of it is creating the links.
	t.Logf("%d links (%d bytes compressed): %d resolution steps (%.1f per link), %d lstat calls; extracted in %s",
		links, len(tgz), stats.linkSteps, float64(stats.linkSteps)/float64(links), stats.lstats, time.Since(start).Round(time.Millisecond))
	if stats.linkSteps > 8*links || stats.lstats > 4*links {
		t.Errorf("resolving %d links took %d steps and %d lstat calls, want at most %d and %d (each link resolved once)",
			links, stats.linkSteps, stats.lstats, 8*links, 4*links)
	}
}

// A link over the hop limit is still refused (the kernel's ELOOP).
func TestSymlinkChainOverHopLimit(t *testing.T) {
	tgz := fanOutTgz(t, 40, 1) // fan/0 needs 41 hops
	err := extractTgz(bytes.NewReader(tgz), t.TempDir(), DefaultLimits(), false)
	if err == nil || !strings.Contains(err.Error(), `"fan/0" has too many levels of symlinks`) {
		t.Fatalf("got %v, want fan/0 refused for too many levels of symlinks", err)
	}
}

// Beyond the budget the extraction fails and says which limit it hit.
func TestSymlinkStepsBudget(t *testing.T) {
	tgz := fanOutTgz(t, 10, 100)
	err := extractTgzWith(bytes.NewReader(tgz), t.TempDir(), extractOptions{limits: DefaultLimits(), linkSteps: 200})
	want := "resolving the repository's 110 symlinks takes more than 200 steps (path components walked and links followed; limit of cmp-server)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want an error containing %q", err, want)
	}
	if err := extractTgzWith(bytes.NewReader(tgz), t.TempDir(), extractOptions{limits: DefaultLimits(), linkSteps: 1000}); err != nil {
		t.Fatalf("within the budget: %v", err)
	}
}

// Remembering results keeps the refusals: a cycle, and a chain over the hop
// limit whose first part was resolved (and remembered) for another link.
// (Targets are recreated lexically resolved inside the repository, so an
// escape through a chain cannot be built from a tarball; the check stays.)
func TestSymlinkRefusalsWithRememberedResults(t *testing.T) {
	for name, c := range map[string]struct {
		entries []tartest.Entry
		want    string
	}{
		"cycle": {[]tartest.Entry{tartest.Symlink("a", "b"), tartest.Symlink("b", "a"), tartest.Symlink("c", "a")},
			"has too many levels of symlinks"},
		"hop limit after a remembered link": {append(chain(30), tartest.Symlink("m", "l30"), tartest.Dir("e"),
			tartest.Symlink("e/l1", "../m"), tartest.Symlink("e/l2", "l1"), tartest.Symlink("e/l3", "l2"),
			tartest.Symlink("e/l4", "l3"), tartest.Symlink("e/l5", "l4"), tartest.Symlink("e/l6", "l5"),
			tartest.Symlink("e/l7", "l6"), tartest.Symlink("e/l8", "l7"), tartest.Symlink("e/l9", "l8"),
			tartest.Symlink("e/l10", "l9")),
			`"e/l10" has too many levels of symlinks`},
	} {
		err := extractTgz(bytes.NewReader(tartest.Tgz(t, c.entries...)), t.TempDir(), DefaultLimits(), false)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", name, err, c.want)
		}
	}
}

// chain is end plus n links, l1 -> end, li -> l(i-1).
func chain(n int) []tartest.Entry {
	entries := []tartest.Entry{tartest.File("end", "x"), tartest.Symlink("l1", "end")}
	for i := 2; i <= n; i++ {
		entries = append(entries, tartest.Symlink(fmt.Sprintf("l%d", i), fmt.Sprintf("l%d", i-1)))
	}
	return entries
}

// A link that leads nowhere is remembered within maxDanglingBytes (its path
// is nobody else's name); beyond, links to the end of a dangling chain each
// walk the chain again, and the budget stops that.
func TestSymlinkDanglingFanOut(t *testing.T) {
	entries := []tartest.Entry{tartest.Symlink("l1", "gone")}
	for i := 2; i <= 39; i++ {
		entries = append(entries, tartest.Symlink(fmt.Sprintf("l%d", i), fmt.Sprintf("l%d", i-1)))
	}
	for i := range 100 {
		entries = append(entries, tartest.Symlink(fmt.Sprintf("f%d", i), "l39"))
	}
	tgz := tartest.Tgz(t, entries...)
	var stats extractStats
	if err := extractTgzWith(bytes.NewReader(tgz), t.TempDir(), extractOptions{limits: DefaultLimits(), linkSteps: 2000, stats: &stats}); err != nil {
		t.Fatalf("remembered: %v", err)
	}
	t.Logf("139 links to a dangling chain, remembered: %d steps", stats.linkSteps)
	defer func(saved int) { danglingCap = saved }(danglingCap)
	danglingCap = 0
	err := extractTgzWith(bytes.NewReader(tgz), t.TempDir(), extractOptions{limits: DefaultLimits(), linkSteps: 2000, stats: &stats})
	t.Logf("139 links to a dangling chain: %d steps, %v", stats.linkSteps, err)
	if err == nil || !strings.Contains(err.Error(), "resolving the repository's 139 symlinks takes more than 2000 steps") {
		t.Fatalf("got %v, want the budget's refusal", err)
	}
	if err := extractTgzWith(bytes.NewReader(tgz), t.TempDir(), extractOptions{limits: DefaultLimits(), stats: &stats}); err != nil {
		t.Fatalf("within the default budget: %v", err)
	}
	t.Logf("not remembered, with the default budget: %d steps", stats.linkSteps)
}
