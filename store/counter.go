package store

import (
	"math"
	"time"
)

// Counter is a fixed-window event counter: Count events since Start. The registry keeps one
// under a key of its choosing for each thing it counts — failed resolves per presented secret
// (after binding.NormalizePresented) and per client address, network samples, revocation
// holdings — and the store keeps it like any other record ([Tx.Counter], [Tx.CountEvent]).
//
// The window is fixed and starts at the first event (description 8: "5 per code within 600
// s"), rather than sliding, so a counter is two numbers and a blocked client learns when it may
// try again. Its methods are pure: they return a new value for the caller to store.
type Counter struct {
	Count int       `json:"count"`
	Start time.Time `json:"start"`
}

// Fail returns the counter after one more event at now. An event after the window has
// passed (or on the zero counter) starts a new window with a count of 1.
func (c Counter) Fail(now time.Time, window time.Duration) Counter {
	now = wholeSecond(now)
	if c.Count <= 0 || !now.Before(c.Start.Add(window)) {
		return Counter{Count: 1, Start: now}
	}
	if c.Count < math.MaxInt {
		c.Count++
	}
	return c
}

// Blocked reports whether the counter has reached limit events within a window that is
// still running at now. With limit 5, the sixth attempt within the window is refused, valid
// secret or not, until the window passes.
func (c Counter) Blocked(now time.Time, limit int, window time.Duration) bool {
	return c.Count >= limit && wholeSecond(now).Before(c.Start.Add(window))
}

// wholeSecond reads a clock as the protocol does, in whole UTC seconds, so that a window
// starts where the binding rules' clock says it does.
func wholeSecond(now time.Time) time.Time { return now.UTC().Truncate(time.Second) }
