package store

import "github.com/svrp/svrp/proto"

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

// ErrUnavailable refuses a write while the store cannot safely take one (see [Health]).
// Nothing was written; reads keep working, and writes resume by themselves once the fault is
// gone (free space returns) or, for a directory that is gone or read-only, after a restart.
var ErrUnavailable = proto.New(proto.StoreUnavailable, "the registry cannot take writes now; reads still work")
