package store_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/store"
)

// The store's sentinels are matched as themselves: an internal error of any other making is
// not ErrChallengesNotKept, though both carry INTERNAL.
func TestStoreErrorsAreThemselves(t *testing.T) {
	if errors.Is(proto.New(proto.Internal, "reading a page failed"), store.ErrChallengesNotKept) {
		t.Error("an internal error matches ErrChallengesNotKept")
	}
	if errors.Is(proto.New(proto.StoreUnavailable, "another refusal"), store.ErrUnavailable) {
		t.Error("another STORE_UNAVAILABLE error matches ErrUnavailable")
	}
	err := store.NewMemory().Update(context.Background(), func(tx store.Tx) error {
		return tx.ConsumeChallenge([]byte("id"), time.Unix(1, 0))
	})
	if !errors.Is(err, store.ErrChallengesNotKept) || proto.CodeOf(err) != proto.Internal {
		t.Errorf("memory ConsumeChallenge: %v (%s), want ErrChallengesNotKept", err, proto.CodeOf(err))
	}
	down := store.Unavailable(io.ErrUnexpectedEOF)
	if !errors.Is(down, store.ErrUnavailable) || !errors.Is(down, io.ErrUnexpectedEOF) || proto.CodeOf(down) != proto.StoreUnavailable {
		t.Errorf("Unavailable: %v (%s), want ErrUnavailable wrapping the cause", down, proto.CodeOf(down))
	}
	if errors.Is(down, store.ErrChallengesNotKept) {
		t.Error("an unavailable store matches ErrChallengesNotKept")
	}
}
