package binding

import (
	"math"
	"time"
)

// Counter methods are pure: they return a new value and the registry stores it under a key of
// its choosing (per presented secret, after [NormalizePresented], and per client address). A
// successful resolve clears the secret's counter: the registry deletes it.
//
// The window is fixed and starts at the first failure (description 8: "5 per code within 600
// s"), rather than sliding, so a counter is two numbers and a blocked client learns when it may
// try again.

// Fail returns the counter after one more failure at now. A failure after the window has
// passed (or on the zero counter) starts a new window with a count of 1.
func (c Counter) Fail(now time.Time, window time.Duration) Counter {
	now = clock(now)
	if c.Count <= 0 || !now.Before(c.Start.Add(window)) {
		return Counter{Count: 1, Start: now}
	}
	if c.Count < math.MaxInt {
		c.Count++
	}
	return c
}

// Blocked reports whether the counter has reached limit failures within a window that is
// still running at now. With limit 5, the sixth attempt within the window is refused, valid
// secret or not, until the window passes.
func (c Counter) Blocked(now time.Time, limit int, window time.Duration) bool {
	return c.Count >= limit && clock(now).Before(c.Start.Add(window))
}
