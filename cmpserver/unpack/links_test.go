package unpack

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

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
	if err := extractTgzWith(bytes.NewReader(tgz), t.TempDir(), extractOptions{limits: DefaultLimits(), stats: &stats}); err != nil {
		t.Fatal(err)
	}
	links := depth + fan
	t.Logf("%d links (%d bytes compressed): %d resolution steps (%.1f per link), %d lstat calls",
		links, len(tgz), stats.linkSteps, float64(stats.linkSteps)/float64(links), stats.lstats)
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
