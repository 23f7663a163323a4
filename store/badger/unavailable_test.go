package badger

import (
	"context"
	"errors"
	"testing"

	"github.com/svrp/svrp/store"
)

// A Badger store that is closed refuses with ErrUnavailable, so that a request a shutdown
// catches is told to come back.
func TestClosedIsUnavailable(t *testing.T) {
	s := openBadger(t, t.TempDir())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, err := range map[string]error{
		"update": s.Update(ctx, func(store.Tx) error { return nil }),
		"view":   s.View(ctx, func(tx store.Tx) error { _, err := tx.NodeCount(); return err }),
	} {
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s on a closed store: %v, want ErrUnavailable", name, err)
		}
	}
}
