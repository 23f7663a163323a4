package pause_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/pause"
)

func TestForStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// A cancelled context ends the wait at once: an hour would time the test out.
	if err := pause.For(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled, an hour: %v, want context.Canceled", err)
	}
	if err := pause.For(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled, no wait: %v, want context.Canceled", err)
	}
}

func TestForWaits(t *testing.T) {
	if err := pause.For(context.Background(), 0); err != nil {
		t.Errorf("no wait: %v", err)
	}
	const d = 20 * time.Millisecond
	start := time.Now()
	if err := pause.For(context.Background(), d); err != nil {
		t.Errorf("a short wait: %v", err)
	}
	if waited := time.Since(start); waited < d {
		t.Errorf("returned after %v, before the %v asked", waited, d)
	}
}
