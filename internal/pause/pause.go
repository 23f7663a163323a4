// Package pause waits for a while unless a context ends first: the one sleep of the module
// that stops when its caller is cancelled. It is used by the client's retries and polls and
// by the benchmark's pacing; it keeps no state and starts no goroutine.
package pause

import (
	"context"
	"time"
)

// For waits for d or until ctx ends, and returns ctx's error in the second case. A d of zero
// or less does not wait, but still reports a context that has already ended, so a loop that
// pauses between tries stops at once.
func For(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
