// Package registry is the svrp registry service: its use cases (node discovery, operator
// login, operator views and the binding handshake) over a [store.Store], and
// [NewHandler], the whole HTTP API as an http.Handler that another Go service can mount.
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
// the daemon (svrpd) or the embedding service owns the process, calls [Service.Sweep]
// periodically and [Service.RepairAtStart] once. Time and randomness are injected through
// [Config], so the whole service runs under a fake clock in tests.
package registry

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/sigverify"
	"github.com/svrp/svrp/store"
)

// Defaults of the limits a daemon flag can change (docs/protocol.md §8).
const (
	DefaultResolveAddressLimit  = 30  // failed resolves per client address per 10 minutes
	DefaultRegisterAddressLimit = 600 // new node keys per client address per hour
	DefaultOnlineWindow         = 600 * time.Second
	registerWindow              = time.Hour
)

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
	// a [store.ChallengeConsumer] ([store.Postgres]'s are).
	ChallengesInStore bool
	// Logger receives one line per notable event; default discards. It never receives a
	// secret.
	Logger *slog.Logger
	// StrictSignatures turns grace mode off: every registration must carry a valid signature.
	StrictSignatures bool
	// ResolveAddressLimit is the number of failed resolves per client address per 10 minutes
	// before that address gets 429; default DefaultResolveAddressLimit.
	ResolveAddressLimit int
	// RegisterAddressLimit is the number of new node keys a client address may register per
	// hour; default DefaultRegisterAddressLimit.
	RegisterAddressLimit int
	// MaxRevocations bounds the revocation list; default DefaultMaxRevocations.
	MaxRevocations int
	// RevokeAddressLimit is the number of new revocations a client address may record per
	// hour; default DefaultRevokeAddressLimit.
	RevokeAddressLimit int

	// The bounds of limits.go that a daemon may change; zero takes the default.
	InitiateAddressLimit      int // DefaultInitiateAddressLimit
	MaxOpenBindingSessions    int // DefaultMaxOpenBindingSessions
	MaxBearerSessions         int // DefaultMaxBearerSessions
	LoginAddressLimit         int // DefaultLoginAddressLimit
	LoginFailureAddressLimit  int // DefaultLoginFailureAddressLimit
	LoginFailureOperatorLimit int // DefaultLoginFailureOperatorLimit
	ResolveOperatorLimit      int // DefaultResolveOperatorLimit
	ResolveGlobalLimit        int // DefaultResolveGlobalLimit
	MalformedAddressLimit     int // DefaultMalformedAddressLimit
	InitiateKeyLimit          int // DefaultInitiateKeyLimit
	// TrustedProxies are the peers whose X-Forwarded-For or Forwarded header names the
	// client; for any other peer those headers are ignored. Empty trusts none.
	TrustedProxies []netip.Prefix
	// MaxNodes is the most node records the registry holds; new keys beyond it get 429.
	// Default DefaultMaxNodes.
	MaxNodes int
	// Verifier checks the signatures of heartbeats, polls, cancels, unbinds, registrations
	// and logins; a *sigverify.Batcher, which the caller starts and stops, checks those
	// that arrive together in batches. Default sigverify.Single{}: each alone. Every
	// Verifier judges by the same rule, so the choice changes cost, never an answer.
	Verifier sigverify.Verifier
}

// Service is the registry. It is safe for concurrent use.
type Service struct {
	store               store.Store
	prefix              string
	clock               func() time.Time
	rand                io.Reader
	challenges          authn.Challenges
	checker             authn.ChallengeChecker // when challenges are consumed in the store
	nodeChecker         authn.NodeChecker      // the node-signed requests, under prefix and clock
	verifier            sigverify.Verifier
	log                 *slog.Logger
	strict              bool
	resolveAddressLimit int
	registerLimit       int
	maxRevocations      int
	revokeAddressLimit  int
	limits              Config // the limits.go bounds, defaults applied
	trustedProxies      []netip.Prefix

	// In-memory state of the global caps and login budgets (limits.go). The open binding
	// sessions are loaded by RepairAtStart; bearer sessions likewise.
	openSessions  *expirySet
	bearers       *expirySet
	loginAttempts *windowCounts // per client address, per challenge lifetime
	loginFailAddr *windowCounts // per client address
	loginFailDID  *windowCounts // per operator DID
	loginFailPair *windowCounts // per operator DID and client address
	malformed     *windowCounts // malformed requests per client address
	warnSessions  rareWarning
	warnBearers   rareWarning

	// Replays and the node table (limits.go).
	maxNodes     int
	nodes        nodeCount
	heartbeats   heartbeatMarks
	warnNodes    rareWarning
	listingTurns listingSlots

	// registrations and touches count the node table's changes, so that a cached listing is
	// rebuilt only when the table changed (see listCache).
	registrations atomic.Uint64
	touches       atomic.Uint64
	lists         listCache
}

// New checks cfg and returns a Service.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("registry: a store is required")
	}
	s := &Service{
		store:               cfg.Store,
		prefix:              cfg.Prefix,
		clock:               cfg.Clock,
		rand:                cfg.Rand,
		challenges:          cfg.Challenges,
		log:                 cfg.Logger,
		strict:              cfg.StrictSignatures,
		resolveAddressLimit: cfg.ResolveAddressLimit,
		registerLimit:       cfg.RegisterAddressLimit,
		maxRevocations:      cfg.MaxRevocations,
		revokeAddressLimit:  cfg.RevokeAddressLimit,
		maxNodes:            cfg.MaxNodes,
		listingTurns:        make(listingSlots, listingSlotCount),
		limits:              cfg,
		trustedProxies:      slices.Clone(cfg.TrustedProxies),
		openSessions:        newExpirySet(),
		bearers:             newExpirySet(),
		loginAttempts:       newWindowCounts(authn.ChallengeTTL),
		loginFailAddr:       newWindowCounts(loginWindow),
		loginFailDID:        newWindowCounts(loginWindow),
		loginFailPair:       newWindowCounts(loginWindow),
		malformed:           newWindowCounts(malformedWindow),
	}
	for _, d := range []struct {
		v   *int
		def int
	}{
		{&s.limits.InitiateAddressLimit, DefaultInitiateAddressLimit},
		{&s.limits.MaxOpenBindingSessions, DefaultMaxOpenBindingSessions},
		{&s.limits.MaxBearerSessions, DefaultMaxBearerSessions},
		{&s.limits.LoginAddressLimit, DefaultLoginAddressLimit},
		{&s.limits.LoginFailureAddressLimit, DefaultLoginFailureAddressLimit},
		{&s.limits.LoginFailureOperatorLimit, DefaultLoginFailureOperatorLimit},
		{&s.limits.ResolveOperatorLimit, DefaultResolveOperatorLimit},
		{&s.limits.ResolveGlobalLimit, DefaultResolveGlobalLimit},
		{&s.limits.MalformedAddressLimit, DefaultMalformedAddressLimit},
		{&s.limits.InitiateKeyLimit, DefaultInitiateKeyLimit},
	} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if s.prefix == "" {
		s.prefix = canonical.DefaultPrefix
	}
	if err := canonical.CheckPrefix(s.prefix); err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	if s.clock == nil {
		s.clock = time.Now
	}
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
	if s.resolveAddressLimit <= 0 {
		s.resolveAddressLimit = DefaultResolveAddressLimit
	}
	if s.registerLimit <= 0 {
		s.registerLimit = DefaultRegisterAddressLimit
	}
	if s.maxNodes <= 0 {
		s.maxNodes = DefaultMaxNodes
	}
	if s.maxRevocations <= 0 {
		s.maxRevocations = DefaultMaxRevocations
	}
	if s.revokeAddressLimit <= 0 {
		s.revokeAddressLimit = DefaultRevokeAddressLimit
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
