package unpack

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"sync"
)

// fileWriters create small files on other goroutines while the extraction goes
// on reading the tarball: on a tree of many small files most of the extraction
// is the kernel creating them (openat), which then runs on every core. The
// extraction still decides everything in tarball order (names, limits, parent
// directories, symlinks); the writers only create, write and close files whose
// name is new in a directory already checked to be real.
type fileWriters struct {
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
// pooled buffer of this size, at most writerQueue+workers of them per request.
const (
	parallelMax = 64 << 10
	writerQueue = 32
)

var writerBufs = sync.Pool{New: func() any { b := make([]byte, parallelMax); return &b }}

// startWriters is newFileWriters; the extraction benchmark swaps it to compare.
var startWriters = newFileWriters

// newFileWriters starts one writer per core beyond the extraction's own; nil
// (write inline) on a single core.
func newFileWriters() *fileWriters {
	n := runtime.GOMAXPROCS(0) - 1
	if n < 1 {
		return nil
	}
	w := &fileWriters{jobs: make(chan writeJob, writerQueue)}
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
		writerBufs.Put(j.buf)
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
// writer's failure, if any.
func (w *fileWriters) submit(abs, name string, mode fs.FileMode, chmod bool, body io.Reader, size int) (int, error) {
	buf := writerBufs.Get().(*[]byte)
	n, err := io.ReadFull(body, (*buf)[:size])
	if err != nil {
		writerBufs.Put(buf)
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return n, fmt.Errorf("error extracting %q: %w", name, err)
	}
	w.pending.Add(1)
	w.jobs <- writeJob{abs: abs, name: name, mode: mode, chmod: chmod, buf: buf, n: n}
	return n, w.failed()
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
