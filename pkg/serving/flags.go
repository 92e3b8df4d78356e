package serving

import (
	"fmt"
	"time"
)

// NotNegative is the error of a limit, timeout or cap given a negative value
// by its flag, where 0 means none; nil when v is not negative.
func NotNegative[T int | int64 | time.Duration](flag string, v T) error {
	if v < 0 {
		return fmt.Errorf("--%s must not be negative (0 means none), got %v", flag, v)
	}
	return nil
}
