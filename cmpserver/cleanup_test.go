package cmpserver

import (
	"testing"
	"time"
)

// idle waits for the removals under way: tests check the work dir after it.
func (r *removals) idle() { r.wg.Wait() }

// TestRemovalsFinish: finish waits for the removals under way, and a removal
// asked for after it (a handler outliving the grace period) runs at once.
func TestRemovalsFinish(t *testing.T) {
	var r removals
	release := make(chan struct{})
	done := make(chan struct{})
	r.run(func() { <-release; close(done) })
	finished := make(chan struct{})
	go func() { r.finish(); close(finished) }()
	// finish must still be waiting after a while (a finish that does not
	// wait returns at once).
	select {
	case <-finished:
		t.Fatal("finish returned while a removal was under way")
	case <-done:
		t.Fatal("the removal ran before it was released")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-finished
	select {
	case <-done:
	default:
		t.Fatal("finish returned before the removal ended")
	}
	ran := false
	r.run(func() { ran = true })
	if !ran {
		t.Fatal("a removal after finish did not run before run returned")
	}
}
