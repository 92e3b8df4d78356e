package catalog

import (
	"crypto/sha256"
	"errors"
	"os"
	"sync"
	"sync/atomic"
)

// Hooks observe a Watcher; both are optional and called from the polling goroutine.
type Hooks struct {
	// Loaded is called with each new valid catalog.
	Loaded func(*Catalog)
	// Failed is called when a changed file cannot be read or is invalid; the
	// previous catalog stays in use.
	Failed func(error)
	// Recovered is called with the catalog in use when the file, unreadable
	// at the previous Reload, is readable again with that catalog's content:
	// nothing is reinstalled, but the failure Failed reported is over.
	Recovered func(*Catalog)
}

// Watcher keeps the newest valid catalog of a file. Who polls it calls Reload
// (the injector does, from a serving.Poller that fingerprints the file's
// content: a ConfigMap volume updates by swapping a symlink, which inotify on
// the file misses). Reload itself skips content it has seen, unless the
// previous Reload could not read the file.
type Watcher struct {
	path  string
	hooks Hooks
	opts  Options

	current atomic.Pointer[Catalog]
	mu      sync.Mutex
	last    [sha256.Size]byte
	tried   bool
	// lastValid says whether the content hashed in last parsed, i.e. is the
	// current catalog's; unreadable whether the previous Reload failed to
	// read the file at all.
	lastValid  bool
	unreadable bool
}

// NewWatcher returns a watcher that parses with opts (ParseWith); nothing is
// read before the first Reload.
func NewWatcher(path string, opts Options, hooks Hooks) *Watcher {
	return &Watcher{path: path, hooks: hooks, opts: opts}
}

// Current is the catalog in use, or nil if no valid version was ever loaded.
func (w *Watcher) Current() *Catalog { return w.current.Load() }

// Reload reads the file and swaps the catalog if the content changed and is
// valid. It returns whether a new catalog was installed.
func (w *Watcher) Reload() (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	data, err := os.ReadFile(w.path)
	if err != nil {
		w.unreadable = true
		w.fail(err)
		return false, err
	}
	sum := sha256.Sum256(data)
	wasUnreadable := w.unreadable
	w.unreadable = false
	if w.tried && sum == w.last {
		switch {
		case !wasUnreadable:
			return false, nil
		case w.lastValid:
			// Back after a read error with the catalog in use: the metric
			// the failure set must recover now, not at the next edit.
			if w.hooks.Recovered != nil {
				w.hooks.Recovered(w.current.Load())
			}
			return false, nil
		}
		// The same invalid version is back: its error is reported again,
		// since the read error replaced it.
	}
	// Remember the hash even on failure so a bad version is reported once, not
	// on every poll.
	w.last, w.tried = sum, true
	c, err := ParseWith(data, w.opts)
	w.lastValid = err == nil
	if err != nil {
		if _, ok := errors.AsType[*unresolvedError](err); ok {
			// The cluster did not answer: the same content is worth
			// another try at the next Reload.
			w.tried = false
		}
		w.fail(err)
		return false, err
	}
	w.current.Store(c)
	if w.hooks.Loaded != nil {
		w.hooks.Loaded(c)
	}
	return true, nil
}

func (w *Watcher) fail(err error) {
	if w.hooks.Failed != nil {
		w.hooks.Failed(err)
	}
}
