package serving

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Fingerprint names the state of what a Poller watches; it changes when that
// state changes.
type Fingerprint func() (string, error)

// Poller calls OnChange whenever Fingerprint's value differs from the one seen
// last, and when it can be computed again after an error even if the value is
// the one seen before: the error was reported to OnChange, so its end must be
// too (a file that vanishes for a moment and comes back unchanged would
// otherwise stay reported as failed). It polls rather than using inotify: the kubelet updates configMap,
// secret and downwardAPI volumes by swapping a "..data" symlink to a new
// directory, which a watch on the file itself never sees, and an editor's
// save may replace the file (rename) or rewrite it in place. Reading a small
// file twice a second costs nothing next to what either event triggers.
type Poller struct {
	Interval    time.Duration
	Fingerprint Fingerprint
	// OnChange gets the new fingerprint, or the error computing it (reported
	// once per distinct error, so a file that stays missing is not logged on
	// every poll). After an error it gets the next fingerprint computed,
	// changed or not.
	OnChange func(fp string, err error)
	last     string
	lastErr  string
}

// Prime records the current fingerprint without calling OnChange: the caller
// loaded this state itself before starting to poll.
func (p *Poller) Prime() {
	fp, err := p.Fingerprint()
	if err == nil {
		p.last = fp
	}
}

// Check computes the fingerprint once and calls OnChange if it changed. It
// reports whether OnChange was called.
func (p *Poller) Check() bool {
	fp, err := p.Fingerprint()
	if err != nil {
		if err.Error() == p.lastErr {
			return false
		}
		p.lastErr = err.Error()
		p.OnChange("", err)
		return true
	}
	recovered := p.lastErr != ""
	p.lastErr = ""
	if fp == p.last && !recovered {
		return false
	}
	p.last = fp
	p.OnChange(fp, nil)
	return true
}

// Run checks every Interval until ctx ends.
func (p *Poller) Run(ctx context.Context) {
	Every(ctx, p.Interval, func() { p.Check() })
}

// Every calls f every interval until ctx ends: the loop of a poller that
// wants more from a poll than whether a fingerprint changed.
func Every(ctx context.Context, interval time.Duration, f func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// FileHash fingerprints files by content (sha256), following symlinks, so the
// kubelet's "..data" swap and an edit in place both change it.
func FileHash(paths ...string) Fingerprint {
	return func() (string, error) {
		h := sha256.New()
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(h, "%s\x00%d\x00", p, len(data))
			h.Write(data)
		}
		return hex.EncodeToString(h.Sum(nil)), nil
	}
}

// TreeStat fingerprints a directory tree by each entry's path, type, size and
// modification time, which changes on any save without reading every file.
// Directories named in skip (e.g. ".git") are not descended into.
func TreeStat(root string, skip ...string) Fingerprint {
	skipped := map[string]bool{}
	for _, s := range skip {
		skipped[s] = true
	}
	return func() (string, error) {
		h := sha256.New()
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && path != root && skipped[d.Name()] {
				return filepath.SkipDir
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s\x00%v\x00%d\x00%d\n", path, info.Mode(), info.Size(), info.ModTime().UnixNano())
			return nil
		})
		if err != nil {
			return "", err
		}
		return hex.EncodeToString(h.Sum(nil)), nil
	}
}

// Combine fingerprints several sources as one.
func Combine(fps ...Fingerprint) Fingerprint {
	return func() (string, error) {
		out := ""
		for _, f := range fps {
			v, err := f()
			if err != nil {
				return "", err
			}
			out += v + "/"
		}
		return out, nil
	}
}
