package servingtest

import "time"

// WaitUntil polls cond every 20 ms for at most d and says whether it held:
// a bound on a test's wait, never a timing assertion.
func WaitUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}
