package playground

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// maxWatched bounds how many entries of the app dir are compared on each poll;
// an app dir is a chart or a kustomization, far below it.
const maxWatched = 20000

// settle is how long the tree must stay unchanged before a change is reported,
// up to maxSettle times.
const (
	settle    = 25 * time.Millisecond
	maxSettle = 8
)

// maxReportedPaths bounds the paths one change event lists.
const maxReportedPaths = 20

// watcher polls the app dir and plugin.yaml: polling works the same on Linux
// and macOS (where authors run the playground), sees through editors that
// replace files by renaming, and one stat per file every PollInterval is
// nothing for a chart.
type watcher struct {
	appDir, config string
	interval       time.Duration
	log            *zap.Logger
	warnedCap      bool
}

// change is what one poll found: paths relative to the app dir (plugin.yaml by
// its base name), and whether plugin.yaml is among them.
type change struct {
	Paths  []string
	Config bool
	More   int // changed paths not listed
}

type stamp struct {
	size  int64
	mtime time.Time
	mode  fs.FileMode
}

func newWatcher(appDir, config string, interval time.Duration, log *zap.Logger) *watcher {
	return &watcher{appDir: appDir, config: config, interval: interval, log: log}
}

// run polls until ctx ends and calls notify once per settled change against
// last, a snapshot the caller took, with the paths that changed: the page wants
// to know which, not only that some did (serving.Poller only says that a
// fingerprint changed).
func (w *watcher) run(ctx context.Context, last map[string]stamp, notify func(change)) {
	serving.Every(ctx, w.interval, func() {
		next := w.snapshot()
		if _, ok := diff(last, next, w.appDir, w.config); !ok {
			return
		}
		next = w.settle(ctx, next)
		c, _ := diff(last, next, w.appDir, w.config)
		last = next
		notify(c)
	})
}

// settle lets a burst of writes end (an editor's save, a git checkout, a file
// rewritten in two steps) so that the page runs once, on the end state, rather
// than on a half-written file.
func (w *watcher) settle(ctx context.Context, next map[string]stamp) map[string]stamp {
	for range maxSettle {
		select {
		case <-ctx.Done():
			return next
		case <-time.After(settle):
		}
		again := w.snapshot()
		if _, changed := diff(next, again, w.appDir, w.config); !changed {
			return again
		}
		next = again
	}
	return next
}

// snapshot stamps every entry under the app dir (but .git) and plugin.yaml,
// by absolute path.
func (w *watcher) snapshot() map[string]stamp {
	out := map[string]stamp{}
	add := func(path string, fi fs.FileInfo) {
		out[path] = stamp{size: fi.Size(), mtime: fi.ModTime(), mode: fi.Mode()}
	}
	if fi, err := os.Stat(w.config); err == nil {
		add(w.config, fi)
	}
	capped := false
	_ = filepath.WalkDir(w.appDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // vanished while walking: the next poll sees it gone
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if len(out) >= maxWatched {
			capped = true
			return filepath.SkipAll
		}
		if fi, err := d.Info(); err == nil {
			add(path, fi)
		}
		return nil
	})
	if capped && !w.warnedCap {
		w.warnedCap = true
		w.log.Warn("the app dir holds too many files: only the first ones are watched", zap.Int("watched", maxWatched))
	}
	return out
}

func diff(prev, next map[string]stamp, appDir, config string) (change, bool) {
	var paths []string
	for p, s := range next {
		if old, ok := prev[p]; !ok || old != s {
			paths = append(paths, p)
		}
	}
	for p := range prev {
		if _, ok := next[p]; !ok {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		return change{}, false
	}
	sort.Strings(paths)
	var c change
	for _, p := range paths {
		if p == config {
			c.Config = true
		}
	}
	for _, p := range paths {
		if len(c.Paths) == maxReportedPaths {
			c.More++
			continue
		}
		if p == config {
			c.Paths = append(c.Paths, filepath.Base(p))
		} else if rel, err := filepath.Rel(appDir, p); err == nil {
			c.Paths = append(c.Paths, rel)
		}
	}
	return c, true
}

// changeEvent is the data of one "change" server-sent event.
type changeEvent struct {
	Seq         uint64   `json:"seq"`
	Paths       []string `json:"paths"`
	More        int      `json:"more,omitempty"`
	Config      bool     `json:"config"`
	ConfigError string   `json:"configError,omitempty"`
}

// broker fans change events out to the event streams, at most max at once.
// Each subscriber holds at most one pending event: a slow page gets the latest
// change, not a queue, which is all it needs to re-run.
type broker struct {
	mu   sync.Mutex
	seq  uint64
	max  int
	subs map[chan changeEvent]struct{}
}

func newBroker(limit int) *broker { return &broker{max: limit, subs: map[chan changeEvent]struct{}{}} }

// errTooManyStreams is subscribe's error when max streams are open.
type errTooManyStreams int

func (e errTooManyStreams) Error() string {
	return fmt.Sprintf("too many pages follow changes: %d already do (limit --max-event-streams); close other playground tabs", int(e))
}

func (b *broker) subscribe() (<-chan changeEvent, uint64, func(), error) {
	ch := make(chan changeEvent, 1)
	b.mu.Lock()
	if len(b.subs) >= b.max {
		b.mu.Unlock()
		return nil, 0, nil, errTooManyStreams(b.max)
	}
	b.subs[ch] = struct{}{}
	seq := b.seq
	b.mu.Unlock()
	return ch, seq, func() {
		b.mu.Lock()
		delete(b.subs, ch)
		b.mu.Unlock()
	}, nil
}

// current is the sequence number of the latest event.
func (b *broker) current() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seq
}

func (b *broker) publish(ev changeEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	ev.Seq = b.seq
	for ch := range b.subs {
		select {
		case ch <- ev:
		default:
			// Replace the pending event with this newer one.
			select {
			case <-ch:
			default:
			}
			ch <- ev
		}
	}
}
