// Package registry is the svrp registry service: its use cases (node discovery, operator
// login, operator views and the binding handshake) over a [store.Store]. Package
// registry/httpapi serves them as the HTTP API, and package registry/answers keeps the
// answers that cost a pass over the node table.
//
// # What it does
//
// A [Service] turns requests into checks from the pure packages (didkey, canonical, authn,
// binding) and transactions on the store. Every check runs in the order that the wire protocol
// (docs/protocol.md) gives for its endpoint, and a failed request changes nothing, except where the
// protocol says otherwise: a consumed login challenge and a counted resolve failure.
//
// # What it does not do
//
// It opens no listener, reads no flags or environment and starts no goroutine of its own:
// the daemon (svrpd) or the embedding service owns the process, calls [Service.RepairAtStart]
// once before serving and runs [Service.Run], the whole upkeep, on a goroutine of its own
// until it stops. Time and randomness are injected through [Config], so the whole service
// runs under a fake clock in tests.
package registry

import (
	"cmp"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/svrp/svrp/registry/budget"
	"github.com/svrp/svrp/registry/limits"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/registry/answers"
	"github.com/svrp/svrp/sigverify"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/translog"
)

// DefaultOnlineWindow is how recently a node must have been seen to count as online.
const DefaultOnlineWindow = 600 * time.Second

// Config wires a Service. Store is required; every other field has a default.
type Config struct {
	// Store keeps all state.
	Store store.Store
	// Prefix is the domain prefix of every signed message; default canonical.DefaultPrefix.
	Prefix string
	// Clock returns the current time; default time.Now. The service truncates it to seconds.
	Clock func() time.Time
	// Rand is the source of short codes, binding tokens and session tokens; default
	// crypto/rand.Reader.
	Rand io.Reader
	// Challenges issues and consumes login challenges; default an authn.Challenger with a
	// fresh random key and its default bound.
	Challenges authn.Challenges
	// ChallengesInStore records consumed login challenges in the store, inside each login's
	// transaction, instead of in the Challenges' memory: registries that share a store and
	// a challenge key then accept each challenge once between them. Challenges must then
	// be an [authn.ChallengeChecker] (an *authn.Challenger is) and the store's transactions
	// keep them (the PostgreSQL store's do; the others refuse with [store.ErrChallengesNotKept]).
	ChallengesInStore bool
	// Logger receives one line per notable event; default discards. It never receives a
	// secret.
	Logger *slog.Logger
	// StrictSignatures turns grace mode off: every registration must carry a valid signature.
	StrictSignatures bool
	// Limits are the bounds put on strangers (package registry/limits); a zero field takes its default.
	Limits limits.Limits
	// FlushEvery is how often [Service.Run] makes heartbeat times kept in memory durable;
	// default DefaultFlushEvery.
	FlushEvery time.Duration
	// SweepEvery is how often [Service.Run] sweeps; default DefaultSweepEvery.
	SweepEvery time.Duration
	// FlushObserver, when not nil, is told how long each flush of [Service.Run] took and
	// how it ended. It must be quick.
	FlushObserver func(took time.Duration, err error)
	// Verifier checks the signatures of heartbeats, polls, cancels, unbinds, registrations
	// and logins; a *sigverify.Batcher, which the caller starts and stops, checks those
	// that arrive together in batches. Default sigverify.Single{}: each alone. Every
	// Verifier judges by the same rule, so the choice changes cost, never an answer.
	Verifier sigverify.Verifier
	// LogOrigin is the transparency log's origin, the name of its key; default one made
	// from the prefix and the key (see [Service.LogKey]).
	LogOrigin string
}

// Service is the registry. It is safe for concurrent use.
type Service struct {
	store       store.Store
	prefix      string
	clock       func() time.Time
	rand        io.Reader
	challenges  authn.Challenges
	checker     authn.ChallengeChecker // when challenges are consumed in the store
	nodeChecker authn.NodeChecker      // the node-signed requests, under prefix and clock
	verifier    sigverify.Verifier
	log         *slog.Logger
	strict      bool
	limits      limits.Limits // defaults applied
	upkeep      upkeep

	// In-memory state of the global caps and login budgets (package registry/limits). The open binding
	// sessions are loaded by RepairAtStart; bearer sessions likewise.
	tables        tables
	loginAttempts *budget.Addresses    // per client address and block, per challenge lifetime
	loginFailAddr *budget.Addresses    // per client address and block
	loginFailPair *budget.Window       // per client address and operator DID
	malformed     *budget.Addresses    // malformed requests per client address and block
	replays       *budget.Addresses    // heartbeat replays per client address and block
	resolveNodes  *budget.NodeFailures // failed resolves that name a node

	// The revocation list's displacement candidates and its cap's warning (revocations.go).
	revokeVictims   revokeVictims
	warnRevocations rareWarning

	// Replays and the node table (package registry/limits).
	heartbeats   budget.HeartbeatMarks
	listingTurns listingSlots

	// registrations and touches count the node table's changes, so that a cached listing is
	// rebuilt only when the table changed (see answers.Listings).
	registrations atomic.Uint64
	touches       atomic.Uint64
	lists         *answers.Listings
	network       *answers.Network

	// The transparency log's key and last checkpoint (translog.go).
	logOrigin string
	logState  logState
}

// New checks cfg and returns a Service.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("registry: a store is required")
	}
	s := &Service{
		store:        cfg.Store,
		prefix:       cfg.Prefix,
		clock:        cfg.Clock,
		rand:         cfg.Rand,
		challenges:   cfg.Challenges,
		log:          cfg.Logger,
		strict:       cfg.StrictSignatures,
		logOrigin:    cfg.LogOrigin,
		listingTurns: make(listingSlots, limits.ListingSlotCount),
		limits:       cfg.Limits.OrDefaults(),
		resolveNodes: budget.NewNodeFailures(limits.MaxResolveNodes, limits.MaxResolveNodePairs),
		upkeep: upkeep{
			flushEvery:   cmp.Or(max(cfg.FlushEvery, 0), DefaultFlushEvery),
			sweepEvery:   cmp.Or(max(cfg.SweepEvery, 0), DefaultSweepEvery),
			observeFlush: cfg.FlushObserver,
		},
	}
	s.tables = newTables(s.limits)
	tracked, block := s.limits.MaxTrackedClients, s.limits.AddressBlockFactor
	s.loginAttempts = budget.NewAddresses(authn.ChallengeTTL, tracked, block)
	s.loginFailAddr = budget.NewAddresses(limits.LoginWindow, tracked, block)
	s.loginFailPair = budget.NewWindow(limits.LoginWindow, tracked)
	s.malformed = budget.NewAddresses(limits.MalformedWindow, tracked, block)
	s.replays = budget.NewAddresses(limits.HeartbeatReplayWindow, tracked, block)
	if s.prefix == "" {
		s.prefix = canonical.DefaultPrefix
	}
	if err := canonical.CheckPrefix(s.prefix); err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	if s.logOrigin != "" {
		if _, err := translog.NewKey(s.logOrigin, [32]byte{}); err != nil {
			return nil, fmt.Errorf("registry: the log's origin: %w", err)
		}
	}
	if s.clock == nil {
		s.clock = time.Now
	}
	s.lists = answers.NewListings(answers.Bounds{
		MaxBytes: limits.MaxListingBytes, MaxGzipBytes: limits.MaxListingGzipBytes, MaxHeldBytes: limits.MaxListingHeldBytes, MaxVariants: limits.MaxListingVariants,
		MaxPage: limits.MaxListingPage, MaxCursorKey: limits.MaxCursorKey,
	}, s.now)
	s.network = answers.NewNetwork(answers.NetworkBounds{
		MaxAge: limits.NetworkStatsMaxAge, Groups: limits.NetworkStatsGroups, HistorySpan: limits.NetworkHistorySpan,
		HistorySettle: limits.NetworkHistorySettle, Variants: limits.NetworkStatsVariants,
	}, s.store, s.clock, s.touches.Load, DefaultOnlineWindow)
	s.verifier = cfg.Verifier
	if s.verifier == nil {
		s.verifier = sigverify.Single{}
	}
	s.nodeChecker = authn.NodeChecker{Prefix: s.prefix, Clock: s.now, Verifier: s.verifier}
	if s.rand == nil {
		s.rand = rand.Reader
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.challenges == nil {
		key, err := authn.NewChallengeKey(s.rand)
		if err != nil {
			return nil, fmt.Errorf("registry: %w", err)
		}
		s.challenges = authn.NewChallenger(key, s.rand, 0)
	}
	if cfg.ChallengesInStore {
		chk, ok := s.challenges.(authn.ChallengeChecker)
		if !ok {
			return nil, errors.New("registry: ChallengesInStore needs Challenges that can check without consuming")
		}
		s.checker = chk
	}
	return s, nil
}

// Prefix returns the domain prefix the service verifies signatures under.
func (s *Service) Prefix() string { return s.prefix }

// now is the registry's clock truncated to whole seconds: every time comparison of the
// protocol uses it.
func (s *Service) now() time.Time { return s.clock().UTC().Truncate(time.Second) }
