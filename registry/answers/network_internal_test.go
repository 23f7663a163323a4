package answers

// Tests of network.go.

import (
	"testing"
	"time"
)

// An answer lives its maximum age while its pass is short, passShare passes once the pass
// is longer than that share of it, and a minute at the most, also for a clock that went back
// during the pass.
func TestAnswerLife(t *testing.T) {
	const maxAge = 5 * time.Second
	for _, c := range []struct{ pass, life time.Duration }{
		{0, maxAge},
		{-time.Hour, maxAge},
		{maxAge / passShare, maxAge},
		{100 * time.Millisecond, 10 * time.Second},
		{400 * time.Millisecond, 40 * time.Second},
		{time.Second, time.Minute},
		{time.Hour, time.Minute},
	} {
		if got := answerLife(maxAge, c.pass); got != c.life {
			t.Errorf("a pass of %v: the answer lives %v, want %v", c.pass, got, c.life)
		}
	}
}
