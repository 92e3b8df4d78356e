package tenancy

import (
	"regexp"
	"sync"
)

// compiled keeps each pattern's regular expression once it has compiled, so
// that Decide, which runs on every request of a plugin with rules, does not
// translate and compile the same admin patterns again each time (which was
// most of a decision's cost: BenchmarkDecide measures it). The patterns come
// only from plugin.yaml, so the set is small; it is still bounded, and starts
// over when full, for a server whose config is reloaded many times with new
// patterns. Patterns that do not compile are not kept (validation refuses
// them at load; Decide skips them).
type compiledGlobs struct {
	mu sync.Mutex
	m  map[string]*regexp.Regexp
}

// maxCompiledGlobs bounds the cache.
const maxCompiledGlobs = 1024

var globs compiledGlobs

// get returns pat's compiled expression.
func (c *compiledGlobs) get(pat string) (*regexp.Regexp, error) {
	c.mu.Lock()
	re, ok := c.m[pat]
	c.mu.Unlock()
	if ok {
		return re, nil
	}
	re, err := compileGlob(pat)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCompiledGlobs {
		c.m = map[string]*regexp.Regexp{}
	}
	c.m[pat] = re
	c.mu.Unlock()
	return re, nil
}
