package registry

import (
	"context"
	"errors"
	"time"

	"github.com/svrp/svrp/store"
)

// Intervals of [Service.Run], when [Config] leaves them zero.
const (
	// DefaultFlushEvery is how often heartbeat times kept in memory are made durable: a
	// crash loses at most this much freshness, and nothing else.
	DefaultFlushEvery = time.Second
	// DefaultSweepEvery is how often expired sessions, counters and heartbeat marks are
	// swept, and the global caps counted again from the store. Reads apply expiry on their
	// own, so this only bounds how long the store keeps what time has decided and how stale
	// another daemon's additions may be in the caps (package registry/limits).
	DefaultSweepEvery = time.Minute
)

// Run does the service's upkeep until ctx is done, on the caller's goroutine: every
// [Config.FlushEvery] it makes the heartbeat times a node cache ([store.WithNodeCache]) holds
// in memory durable, and every [Config.SweepEvery] it sweeps ([Service.Sweep]) and lets the
// store do its own maintenance, under the store's upkeep lock ([store.Maintainer]): on a
// store shared by several registries, a round whose lock another holds only counts again for
// the global caps ([Service.Recount]).
// Every minute it samples the network's history ([Service.SampleNetwork]), lock or not.
//
// Failures of a round are logged, and the next round tries again; a store that refuses
// writes has said so once and is not logged again every round. When ctx is done Run makes
// the last heartbeat times durable, under a context that is no longer cancelled, and returns
// that flush's error: a caller that bounds its shutdown bounds its wait for Run.
//
// Run first takes the node listing's snapshot once, so that the first listing asked for finds
// every record already measured rather than measuring the whole table before its first byte.
//
// Call [Service.RepairAtStart] once before serving, then Run, once, until the service stops.
func (s *Service) Run(ctx context.Context) error {
	s.warmListing(ctx)
	flushes := time.NewTicker(s.upkeep.flushEvery)
	defer flushes.Stop()
	sweeps := time.NewTicker(s.upkeep.sweepEvery)
	defer sweeps.Stop()
	samples := time.NewTicker(networkSampleEvery)
	defer samples.Stop()
	for {
		select {
		case <-ctx.Done():
			return s.store.Flush(context.WithoutCancel(ctx))
		case <-flushes.C:
			s.flush(ctx)
		case <-sweeps.C:
			s.upkeepRound(ctx)
		case <-samples.C:
			// Every registry samples, outside the upkeep lock: each adds the heartbeats it
			// took to the shared history.
			if err := s.SampleNetwork(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, store.ErrUnavailable) {
				s.log.Warn("sampling the network failed", "err", err)
			}
		}
	}
}

// flush makes the heartbeat times the store holds in memory durable and tells the flush
// observer how long it took; a flush cut off by the end of Run is not observed.
func (s *Service) flush(ctx context.Context) {
	start := time.Now()
	err := s.store.Flush(ctx)
	if ctx.Err() != nil {
		return
	}
	if s.upkeep.observeFlush != nil {
		s.upkeep.observeFlush(time.Since(start), err)
	}
	if err != nil && !errors.Is(err, store.ErrUnavailable) {
		s.log.Error("making heartbeat times durable failed", "err", err)
	}
}

// upkeepRound sweeps and maintains the store, or, on a shared store whose upkeep another
// registry is doing, counts again for the global caps.
func (s *Service) upkeepRound(ctx context.Context) {
	sweep := func(ctx context.Context) error {
		if err := s.Sweep(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, store.ErrUnavailable) {
			s.log.Error("sweep failed", "err", err)
		}
		if err := s.store.Maintain(ctx); err != nil {
			s.log.Warn("store maintenance failed", "err", err)
		}
		return nil
	}
	ran, err := s.store.Exclusive(ctx, upkeepLock, sweep)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			s.log.Warn("taking the upkeep lock failed", "err", err)
		}
	case !ran:
		s.log.Debug("upkeep skipped: another registry holds the lock")
		// The global caps still count what the others added, once a sweep interval.
		if err := s.Recount(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, store.ErrUnavailable) {
			s.log.Error("counting for the global caps failed", "err", err)
		}
	}
}

// networkSampleEvery is the step of the network history's finest series: one sample a
// minute is one point of its charts.
const networkSampleEvery = time.Minute

// upkeepLock is the lock of the store's under which one registry of several sharing it
// sweeps.
const upkeepLock = 0x73767270_0002

// upkeep is how Run is configured.
type upkeep struct {
	flushEvery, sweepEvery time.Duration
	observeFlush           func(took time.Duration, err error)
}

// warmListing takes the node listing's snapshot and lets it go. A failure costs only the
// first listing's speed, which then measures the table itself: it is logged at debug level.
func (s *Service) warmListing(ctx context.Context) {
	_, release, err := s.NodeListing(ctx)
	release()
	if err != nil && ctx.Err() == nil {
		s.log.Debug("taking the node listing's first snapshot failed", "err", err)
	}
}
