package client

import (
	"math/rand/v2"
	"time"
)

// Retry defaults of docs/protocol.md §9.
const (
	DefaultRetries      = 2
	DefaultBackoffBase  = 250 * time.Millisecond
	DefaultBackoffCap   = 5 * time.Second
	maxBackoffDoublings = 30 // keeps Base << n from overflowing
)

// RetryPolicy says how the client retries a request that failed with HTTP 429, a 5xx or a
// network error; any other answer is final. Retry n (0-based) waits a uniformly random time
// in [0, min(Cap, Base·2^n)] ("full jitter"), so that many clients that failed together do
// not come back together.
type RetryPolicy struct {
	// Retries is the number of attempts after the first; 0 turns retries off.
	Retries int
	// Base is the ceiling of the first wait; 0 means DefaultBackoffBase.
	Base time.Duration
	// Cap bounds every ceiling; 0 means DefaultBackoffCap.
	Cap time.Duration
	// Jitter returns the wait for a ceiling, a value in [0, ceiling]. nil draws it uniformly;
	// tests set it to observe the ceilings without waiting.
	Jitter func(ceiling time.Duration) time.Duration
}

// DefaultRetryPolicy is 2 retries, base 250 ms, cap 5 s, full jitter.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{Retries: DefaultRetries, Base: DefaultBackoffBase, Cap: DefaultBackoffCap}
}

func (p RetryPolicy) normalized() RetryPolicy {
	if p.Retries < 0 {
		p.Retries = 0
	}
	if p.Base <= 0 {
		p.Base = DefaultBackoffBase
	}
	if p.Cap <= 0 {
		p.Cap = DefaultBackoffCap
	}
	return p
}

// Ceiling returns min(Cap, Base·2^n), the most that retry n may wait.
func (p RetryPolicy) Ceiling(n int) time.Duration {
	p = p.normalized()
	if n > maxBackoffDoublings {
		n = maxBackoffDoublings
	}
	d := p.Base << n
	if d <= 0 || d > p.Cap {
		return p.Cap
	}
	return d
}

// delay draws the wait before retry n.
func (p RetryPolicy) delay(n int) time.Duration {
	ceiling := p.Ceiling(n)
	if p.Jitter != nil {
		return min(max(p.Jitter(ceiling), 0), ceiling)
	}
	return rand.N(ceiling + 1)
}
