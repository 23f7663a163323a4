package store

import (
	"errors"
	"fmt"

	"github.com/svrp/svrp/proto"
)

// Health is what a store says about the ground it stands on: the Badger store about its
// disk, the PostgreSQL store about its server.
type Health struct {
	// State is one of HealthOK, HealthLowSpace, HealthGone and HealthReadOnly.
	State string
	// Detail says why, in words for an operator; it names no path.
	Detail string
}

// States of [Health]. Every state but HealthOK refuses writes with [ErrUnavailable].
const (
	HealthOK       = "ok"
	HealthLowSpace = "low_space" // free space on the volume is below the reserve
	HealthGone     = "gone"      // the data directory was removed or replaced, or the server does not answer
	HealthReadOnly = "read_only" // the data directory can no longer take new files
)

// ErrUnavailable refuses an operation while the store cannot safely take it: Badger's disk is
// below its reserve or its directory is gone or read-only (see [Health]), or the store is
// closed; PostgreSQL cannot be reached, is shutting down or starting up, or has no connection
// to spare. Nothing was written, and the operation may be tried again later: writes resume by
// themselves once the fault is gone (free space returns, the server is back) or, for a
// directory that is gone or read-only, after a restart. Every error that is it or wraps it
// answers errors.Is(err, ErrUnavailable).
var ErrUnavailable = proto.New(proto.StoreUnavailable, "the registry cannot take writes now; reads still work")

// errUnreachable is [ErrUnavailable] as a client reads it when the store itself cannot be
// reached, reads included.
var errUnreachable = ErrUnavailable.With("the registry's store cannot be reached now; retry later")

// Unavailable wraps err, a backend's failure to reach its store, as [ErrUnavailable]: the
// client reads that the store cannot be reached, errors.Is finds both ErrUnavailable and
// err, and the log line keeps err's text.
func Unavailable(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", errUnreachable, err)
}
