package registry

import (
	"context"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/svrp/svrp/registry/answers"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/budget"
	"github.com/svrp/svrp/registry/limits"
	"github.com/svrp/svrp/store"
)

// What an HTTP layer (package registry/httpapi) asks of the service besides the use cases:
// the cached answers of the node listings and the network view, the turns to write a
// listing, the budget of malformed requests, the forms of the actions a node or an
// operator may take, and the log. Each is a method here, so that the layer reaches nothing
// of the service's own.

// Nodes returns the node records that pass f, sorted by first_seen then key.
func (s *Service) Nodes(ctx context.Context, f api.NodeFilter) ([]store.Node, error) {
	refs, err := answers.SortedNodes(ctx, s.store, f, s.now())
	out := make([]store.Node, len(refs))
	for i, n := range refs {
		out[i] = *n
	}
	return out, err
}

// NodeListing returns the current snapshot of the node table, from which every node
// listing is cut, and the function that releases it once the answer is written. The
// snapshot follows the table at most a second late (package registry/answers).
func (s *Service) NodeListing(ctx context.Context) (*answers.Snapshot, func(), error) {
	return s.lists.Get(s.listVersion(), func(snap *answers.Snapshot) error {
		return snap.Build(ctx, s.store)
	})
}

// ListingPage reads the paging query q of a listing whose tie-breaking keys are keyLen
// bytes long (0: they vary) within the registry's bounds: the page, and the cursor it
// continues from (nil on a first page). A bad page is BAD_REQUEST.
func (s *Service) ListingPage(q url.Values, keyLen int) (api.Page, *answers.Cursor, error) {
	return s.lists.Page(q, keyLen)
}

// nodesChanged marks every cached node listing as out of date.
func (s *Service) nodesChanged() { s.registrations.Add(1) }

// listVersion is the state of the node table for the list cache. Changes another daemon
// made to a shared store count as registrations: the cache follows them a few times a
// second, so each is a rebuild at most that often.
func (s *Service) listVersion() answers.Version {
	regs := s.registrations.Load() + s.store.RemoteChanges()
	return answers.Version{Registrations: regs, Touches: s.touches.Load(), Second: s.now().Unix()}
}

// listingSlots lets limits.ListingSlotCount listings be written at once (package registry/limits).
type listingSlots chan struct{}

// ListingTurn waits for a turn to write a listing and reports whether it got one before ctx
// ended. The turn ends when the request does, or limits.ListingSlotHold after it began, whichever
// comes first: a reader too slow to take its listing in that time keeps receiving it, but
// no longer holds up anyone else's.
func (s *Service) ListingTurn(ctx context.Context) bool {
	select {
	case s.listingTurns <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	release := sync.OnceFunc(func() { <-s.listingTurns })
	timer := time.AfterFunc(limits.ListingSlotHold, release)
	context.AfterFunc(ctx, func() {
		timer.Stop()
		release()
	})
	return true
}

// NetworkStats returns the current answer of GET /v1/network/stats, rebuilt when it is
// older than its life or a sample came since (package registry/answers).
func (s *Service) NetworkStats(ctx context.Context) (*answers.NetworkAnswer, error) {
	return s.network.Answer(ctx)
}

// SampleNetwork records the network's state in the history: the nodes online and registered
// this hour, and the heartbeats this daemon accepted since its last sample. [Service.Run]
// calls it every minute, on every registry of a shared store.
func (s *Service) SampleNetwork(ctx context.Context) error { return s.network.Sample(ctx) }

// RefuseMalformed returns the RATE_LIMITED refusal of a request from the client address
// addr when its budget of malformed requests is spent, and nil otherwise. It is asked
// before a request's body is read.
func (s *Service) RefuseMalformed(addr string) error {
	byAddr, byBlock := s.malformed.Spent(addr, s.limits.MalformedAddressLimit, s.now())
	if !byAddr && !byBlock {
		return nil
	}
	return budget.RateLimited(budget.Pick(byBlock, budget.LimitMalformedPerBlock, budget.LimitMalformedPerAddress), "too many malformed requests from this address; wait before sending more")
}

// CountMalformed counts a malformed request (answered 400 or 413) from addr against its
// budget.
func (s *Service) CountMalformed(addr string) { s.malformed.Add(addr, s.now()) }

// Logger is the log the service writes to; the HTTP layer writes its lines there too.
func (s *Service) Logger() *slog.Logger { return s.log }
