package registry

import (
	"context"
	"testing"
	"time"

	"github.com/svrp/svrp/registry/limits"
)

// TestListingTurn: a turn ends with its request, or after limits.ListingSlotHold when the reader is
// slow; meanwhile the next reader waits, and gives up when its own request ends.
func TestListingTurn(t *testing.T) {
	s := &Service{listingTurns: make(listingSlots, 1)}
	first, endFirst := context.WithCancel(t.Context())
	if !s.ListingTurn(first) {
		t.Fatal("no turn for the first reader")
	}
	waiting, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if s.ListingTurn(waiting) {
		t.Fatal("a second reader got a turn while the first held it")
	}
	endFirst()
	second := t.Context()
	if !s.ListingTurn(second) {
		t.Fatal("the first request ended, but its turn was not given back")
	}
	start := time.Now()
	if !s.ListingTurn(t.Context()) {
		t.Fatal("no turn after the slow reader's hold")
	}
	if waited := time.Since(start); waited < limits.ListingSlotHold/2 {
		t.Fatalf("the turn was given back after %v, before the hold of %v", waited, limits.ListingSlotHold)
	}
}
