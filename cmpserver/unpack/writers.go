package unpack

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
)

// fileWriters create small files on other goroutines while the extraction goes
// on reading the tarball: on a tree of many small files most of the extraction
// is the kernel creating them (openat), which then runs on every core. The
// extraction still decides everything in tarball order (names, limits, parent
// directories, symlinks); the writers only create, write and close files whose
// name is new in a directory already checked to be real.
type fileWriters struct {
	budget  *byteBudget // the process's queuedBytes; tests give their own
	jobs    chan writeJob
	workers sync.WaitGroup
	pending sync.WaitGroup // one per job not yet written
	mu      sync.Mutex
	err     error // the first failure
	closed  sync.Once
}

type writeJob struct {
	abs, name string // path, and the entry's name for the error
	mode      fs.FileMode
	chmod     bool // apply mode after the umask narrowed it (preserveFileMode)
	buf       *[]byte
	n         int
}

// parallelMax is the largest file handed to a writer; the contents wait in a
// pooled buffer of the smallest writerBufSizes that fits, at most
// writerQueue+workers of them per request.
const (
	parallelMax = 64 << 10
	writerQueue = 32
)

// writerBufSizes are the pooled buffers' sizes: a repository's files are
// mostly a few KiB, and a queued 1 KiB file held a 64 KiB buffer.
var writerBufSizes = [...]int{4 << 10, 16 << 10, parallelMax}

var writerBufs [len(writerBufSizes)]sync.Pool

// writerBudget bounds what the queued files of every extraction in the
// process hold at once. One request's queue holds at most about 2 MiB
// (writerQueue+workers buffers of parallelMax), so a single request never
// meets the bound; 20 at once (an application controller's refresh) held
// 17 MiB of queued files on two cores. A file that finds the budget spent is
// written by the extraction itself, as on one core: nothing waits for it.
const writerBudget = 4 << 20

var queuedBytes = newByteBudget(writerBudget)

// byteBudget counts bytes held against a bound.
type byteBudget struct {
	max  int64
	held atomic.Int64
}

func newByteBudget(max int64) *byteBudget { return &byteBudget{max: max} }

// take holds n bytes if the bound allows it.
func (b *byteBudget) take(n int) bool {
	if b.held.Add(int64(n)) > b.max {
		b.held.Add(-int64(n))
		return false
	}
	return true
}

func (b *byteBudget) release(n int) { b.held.Add(-int64(n)) }

// writerBufClass is the index of the smallest buffer size holding size bytes.
func writerBufClass(size int) int {
	for i, c := range writerBufSizes {
		if size <= c {
			return i
		}
	}
	return len(writerBufSizes) - 1
}

// getWriterBuf is a pooled buffer for a file of size bytes (<= parallelMax),
// or false when the budget is spent.
func (w *fileWriters) getWriterBuf(size int) (*[]byte, bool) {
	class := writerBufClass(size)
	n := writerBufSizes[class]
	if !w.budget.take(n) {
		return nil, false
	}
	if b, ok := writerBufs[class].Get().(*[]byte); ok {
		return b, true
	}
	b := make([]byte, n)
	return &b, true
}

func (w *fileWriters) putWriterBuf(b *[]byte) {
	n := cap(*b)
	writerBufs[writerBufClass(n)].Put(b)
	w.budget.release(n)
}

// startWriters is newFileWriters; the extraction benchmark swaps it to compare.
var startWriters = newFileWriters

// newFileWriters starts one writer per core beyond the extraction's own; nil
// (write inline) on a single core.
func newFileWriters() *fileWriters {
	n := runtime.GOMAXPROCS(0) - 1
	if n < 1 {
		return nil
	}
	w := &fileWriters{budget: queuedBytes, jobs: make(chan writeJob, writerQueue)}
	for range n {
		w.workers.Add(1)
		go w.run()
	}
	return w
}

func (w *fileWriters) run() {
	defer w.workers.Done()
	for j := range w.jobs {
		if err := j.write(); err != nil {
			w.mu.Lock()
			if w.err == nil {
				w.err = err
			}
			w.mu.Unlock()
		}
		w.putWriterBuf(j.buf)
		w.pending.Done()
	}
}

func (j writeJob) write() error {
	// O_EXCL: never follow whatever might sit at the final component.
	f, err := os.OpenFile(j.abs, os.O_WRONLY|os.O_CREATE|os.O_EXCL, j.mode)
	if err != nil {
		return fmt.Errorf("error extracting %q: %w", j.name, err)
	}
	_, err = f.Write((*j.buf)[:j.n])
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && j.chmod {
		err = os.Chmod(j.abs, j.mode)
	}
	if err != nil {
		return fmt.Errorf("error extracting %q: %w", j.name, err)
	}
	return nil
}

// submit reads size bytes of body and queues the file; it returns an earlier
// writer's failure, if any. When the budget is spent it reads nothing and
// says the file was not queued: the caller writes it.
func (w *fileWriters) submit(abs, name string, mode fs.FileMode, chmod bool, body io.Reader, size int) (n int, queued bool, err error) {
	buf, ok := w.getWriterBuf(size)
	if !ok {
		return 0, false, nil
	}
	n, err = io.ReadFull(body, (*buf)[:size])
	if err != nil {
		w.putWriterBuf(buf)
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return n, true, fmt.Errorf("error extracting %q: %w", name, err)
	}
	w.pending.Add(1)
	w.jobs <- writeJob{abs: abs, name: name, mode: mode, chmod: chmod, buf: buf, n: n}
	return n, true, w.failed()
}

func (w *fileWriters) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// barrier waits until every queued file is written: before a name written
// earlier is replaced or checked on disk.
func (w *fileWriters) barrier() error {
	w.pending.Wait()
	return w.failed()
}

// close waits for the writers to finish and stop; it may be called again.
func (w *fileWriters) close() error {
	w.closed.Do(func() {
		close(w.jobs)
		w.workers.Wait()
	})
	return w.failed()
}
