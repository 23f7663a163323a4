// Package store is the registry's state as a contract: node records, binding sessions,
// active bindings, bearer sessions, revocations and counters behind [Store] and [Tx], with
// what a store offers beyond transactions (touching and scanning nodes, reading counters,
// upkeep, health) part of the contract, so that no caller asks a store what it is. It holds
// the memory store ([NewMemory]), for tests and for daemons that need no durability, and the
// node cache ([WithNodeCache]), which puts the node table in memory in front of any store.
// The durable stores are packages of their own: store/badger, an embedded store on one
// machine, and store/postgres, a database shared by any number of daemons. Whoever opens a
// store chooses one; the registry sees only the contract. store/storetest is the
// behavioural suite every store passes.
//
// Every read and write happens inside a transaction ([Store.View], [Store.Update]), so each
// use case of the registry — a binding transition, a challenge consumption, an activation that
// supersedes an older binding — is atomic whatever the store. An Update function may be run
// more than once when transactions conflict, so it must have no effects outside its
// transaction.
//
// The store never sees a secret in clear: short codes, binding tokens and session tokens
// arrive as SHA-256 hashes.
//
// # What the store does not do
//
// It applies no protocol rule. It does not expire sessions, check that a DID belongs to its
// key, refuse a short DID that another key already uses, or count sessions per node: the
// registry does all that inside its transactions, where it can read what it is about to
// change. The store only keeps its indexes in step with the records it is given, so a lookup
// by DID, short body, secret hash, node key or operator always agrees with the records.
// Nothing is ever removed except bearer sessions, counters, active bindings (which an unbind
// or a revocation ends), binding sessions the registry deletes after their retention
// (whose ids stay reserved as hashes), node records the registry expires or displaces, and
// revocations the registry lets expire or give way; operator pins are replaced, not deleted.
// It runs no goroutine for upkeep: its owner calls Flush and Maintain.
//
// # Concurrency
//
// A decision taken on what a lookup did not find (no session to spare, no other key on a
// short body) must still hold at commit. The memory and Badger stores get that by running
// Updates one at a time, so their functions run once. The PostgreSQL store runs Updates
// concurrently, each SERIALIZABLE, which covers ranges scanned as well as records read, and
// runs a function again when its transaction loses a conflict. Every store refuses a write
// inside View ([ErrWriteInView]) or from the function passed to an Each method
// ([ErrWriteInEach]), and a Tx used after its function returned ([ErrTxDone]). Each
// methods happen to visit records in key order; the contract promises no order.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/store/internal/rules"
)

// ErrNotFound is returned by a lookup that finds nothing.
var ErrNotFound = errors.New("store: not found")

// Misuse of a transaction, refused alike by every implementation so that a registry tested
// against one does not break on another.
var (
	// ErrWriteInView is a write inside View.
	ErrWriteInView = rules.ErrWriteInView
	// ErrWriteInEach is a write from the function passed to an Each method, which the Tx
	// contract forbids because an iteration would otherwise see a half-applied change.
	ErrWriteInEach = rules.ErrWriteInEach
	// ErrTxDone is a Tx kept past its function. It would act outside any transaction.
	ErrTxDone = rules.ErrTxDone
	// ErrClosed is a transaction after Close.
	ErrClosed = rules.ErrClosed
)

// ErrChallengeUsed is returned by ConsumeChallenge for a challenge consumed before.
var ErrChallengeUsed = errors.New("store: challenge already used")

// ErrChallengesNotKept is returned by ConsumeChallenge in a store that does not keep login
// challenges: a registry configured to consume them there is misconfigured.
var ErrChallengesNotKept = proto.New(proto.Internal, "the store does not keep login challenges")

// Store is a transactional store and what it offers beside transactions. A store with
// nothing of its own for a capability embeds [Defaults] or answers with the InView and
// InUpdate helpers, so every Store has every method and a caller never asks which it has.
type Store interface {
	// View runs fn in a read-only transaction.
	View(ctx context.Context, fn func(Tx) error) error
	// Update runs fn in a read-write transaction and commits it when fn returns nil; when fn
	// returns an error nothing it wrote is kept and the error is returned as is. fn may run
	// more than once if the transaction conflicts with another. A nil return means the
	// writes are committed, and on disk if the implementation keeps anything on disk.
	Update(ctx context.Context, fn func(Tx) error) error
	// Close releases the store. It is safe to call once, after every transaction returned.
	Close() error

	CounterReader
	NodeToucher
	NodeScanner
	NodeFollower
	Maintainer
	HealthReporter
}

// CounterReader reads counters outside any transaction. The PostgreSQL store reads them in
// one statement, where a View adds its BEGIN and ROLLBACK; a store with nothing cheaper
// answers with [ReadCountersInView].
type CounterReader interface {
	// ReadCounters returns what Counters would return in a View of its own.
	ReadCounters(ctx context.Context, keys ...string) ([]Counter, error)
}

// NodeToucher records a node's freshness. The node cache records it in memory and makes it
// durable at its next Flush, so that a heartbeat costs no disk write of its own; the
// PostgreSQL store writes it in one statement of its own; a store with nothing cheaper
// writes it in an Update ([TouchNodeInUpdate]) and has nothing to flush.
type NodeToucher interface {
	// TouchNode moves the node's last_seen forward to seen (never back). It returns
	// ErrNotFound when the key has no record.
	TouchNode(ctx context.Context, key didkey.PublicKey, seen time.Time) error
	// Flush makes every touch so far durable.
	Flush(ctx context.Context) error
}

// NodeScanner visits the node table as one snapshot, outside any transaction where the store
// can: the node cache makes each record from a list of its table taken as the scan starts, in
// listing order. fn may keep the records it is given, but must not modify them. A store with
// nothing cheaper visits them in a View ([ScanNodesInView]). The registry's census and
// network figures read the table with it; the listings read the node cache's list itself
// ([ListNodes]).
type NodeScanner interface {
	ScanNodes(ctx context.Context, fn func(*Node) error) error
}

// NodeFollower is what a store says about the node writes of other processes.
type NodeFollower interface {
	// RemoteChanges counts the node changes a cache following a shared store has taken
	// from other processes, so that a listing built before one is known to be stale; 0 for
	// any other store.
	RemoteChanges() uint64
	// NodeFeed returns the feed of a store that other processes write too, which the node
	// cache follows instead of assuming it is the one writer; nil for a store this process
	// alone writes.
	NodeFeed() NodeFeed
}

// NodeFeed is the node table of a store shared by several processes, as the node cache
// follows it.
type NodeFeed interface {
	// NodeChanges calls fn with each node record written since mark (0: every record) and
	// its revision, which grows with each write of the record (and goes on growing when a
	// deleted key is registered again), and gone with each key whose record was deleted since
	// mark and not written again, with the revision it had; it returns the next mark. It
	// may call fn and gone again for changes already seen. It calls seen with each
	// heartbeat flushed (TouchNodes) since mark, by key and time alone: a heartbeat does
	// not rewrite the record, so it comes without one, and seen may name a key fn has not
	// given (deleted since, or not yet read), which the caller passes over.
	NodeChanges(ctx context.Context, mark int64, fn func(n Node, rev uint64), gone func(key didkey.PublicKey, rev uint64), seen func(key didkey.PublicKey, at time.Time)) (int64, error)
	// TouchNodes moves last_seen of keys[i] forward to seen[i], in one step.
	TouchNodes(ctx context.Context, keys []didkey.PublicKey, seen []time.Time) error
}

// Maintainer is a store's periodic upkeep. The owner calls Maintain every few minutes from
// one goroutine, under Exclusive; the store stays correct without it, only its disk use
// grows.
type Maintainer interface {
	// Maintain reclaims space, returning when nothing is left worth reclaiming or ctx is
	// done. Transactions may run meanwhile. A store with nothing to reclaim returns nil.
	Maintain(ctx context.Context) error
	// Exclusive runs fn unless another holder of the same lock is running it on this
	// store, and reports whether it ran: of several daemons sharing a store, one at a time
	// sweeps. A store that one process alone opens runs fn.
	Exclusive(ctx context.Context, lock int64, fn func(context.Context) error) (bool, error)
}

// HealthReporter is what a store says about the ground it stands on: its disk, or its
// server.
type HealthReporter interface {
	// Health returns the last state seen; the zero Health for a store that watches nothing.
	Health() Health
	// CheckWrite returns the error a write would get now ([ErrUnavailable]), or nil. The
	// node cache asks it before a heartbeat, which writes to memory only.
	CheckWrite() error
}

// ChallengeConsumer keeps consumed login challenges, so that registries sharing the store
// accept each challenge once between them. A store that does not keep them refuses with
// [ErrChallengesNotKept].
type ChallengeConsumer interface {
	// ConsumeChallenge records a login challenge as used until its expiry, and fails with
	// ErrChallengeUsed when it already is. Inside an Update, the consumption is part of the
	// login's transaction.
	ConsumeChallenge(id []byte, expires time.Time) error
}

// Node is a node record as registered (docs/protocol.md §4.1), keyed by its public key.
type Node struct {
	Key          didkey.PublicKey `json:"key"`
	DID          string           `json:"did"` // the spelling last registered
	Endpoint     string           `json:"endpoint"`
	Capabilities []string         `json:"capabilities"`
	Region       string           `json:"region,omitempty"` // "" is null
	// Signature is the registration signature as given, nil when none was sent.
	Signature         *string   `json:"signature,omitempty"`
	SignatureVerified bool      `json:"signature_verified"`
	FirstSeen         time.Time `json:"first_seen"`
	LastSeen          time.Time `json:"last_seen"`
	// RegistrationTS is the signed ts of the v2 registration the record came from (docs/protocol.md
	// §10.1), nil for a v1 registration and for records stored before v2 existed.
	RegistrationTS *int64 `json:"registration_ts,omitempty"`
	// Origin is the client group (an IPv4 address, an IPv6 /64) the key was first registered from, which the
	// registry's quotas count it against at every level of the address hierarchy (package
	// registry/netblock). Records stored by earlier releases hold the IPv4 /24 or IPv6 /48
	// instead, which counts as the narrowest group known; empty for the oldest, which count
	// together. It is stored under its earlier name, address_block.
	Origin string `json:"address_block,omitempty"`
}

// Revocation is a credential revocation as verified and recorded (docs/protocol.md §10.5): the pair
// (OperatorDID, RevocationID) is revoked for good. The signed message and signature are kept
// so that anyone can verify the record again.
type Revocation struct {
	OperatorDID  string    `json:"operator_did"`
	RevocationID string    `json:"revocation_id"`
	RevokedAt    time.Time `json:"revoked_at"`
	// RootPublicKey is the root key string exactly as signed; Signature the base58 signature.
	RootPublicKey string    `json:"root_public_key"`
	Signature     string    `json:"signature"`
	RecordedAt    time.Time `json:"recorded_at"`
	// Group is the address block the revocation came from, whose holdings it counts in;
	// Proven that its root key had logged in when it was recorded. The registry reads them
	// to choose which revocations may expire or give way (docs/protocol.md §8.1).
	Group  string `json:"group,omitempty"`
	Proven bool   `json:"proven,omitempty"`
}

// Tx is one transaction. Methods that look one thing up return ErrNotFound when it is
// absent; methods that return a list return an empty one. A Tx must not be used after its
// function returns, nor from several goroutines. The function passed to an Each method must
// not write through the Tx: collect, then write. Values are copied in and out: changing a
// slice or pointee passed to or returned by a Tx never changes what is stored.
type Tx interface {
	// Node returns the record of key.
	Node(key didkey.PublicKey) (Node, error)
	// PutNode creates or replaces the record of n.Key and keeps the DID and short-body
	// indexes in step. The store does not check that a DID string is used by one key only;
	// if two records use the same one, NodeKeyByDID finds the one put last.
	PutNode(n Node) error
	// NodeKeyByDID returns the key whose record was registered under exactly this DID string.
	NodeKeyByDID(did string) (didkey.PublicKey, error)
	// NodeKeysByShortBody returns every key with a record whose short body
	// (hex(SHA-256(k))[0:8]) is body, whatever DID spelling the record uses.
	NodeKeysByShortBody(body string) ([]didkey.PublicKey, error)
	// EachNode calls fn for every node record, in no particular order, until fn returns an
	// error, which EachNode returns.
	EachNode(fn func(Node) error) error
	// NodeCount returns the number of node records.
	NodeCount() (int, error)
	// DeleteNode removes the record of key and its DID and short-body index entries;
	// absent is not an error. The registry deletes only nodes that are not bound.
	DeleteNode(key didkey.PublicKey) error

	// BindingSession returns the binding session with this binding_session_id.
	BindingSession(id string) (binding.BindingSession, error)
	// PutBindingSession creates or replaces a binding session and keeps its indexes (secret hashes,
	// node key) in step. The node-key index holds only sessions whose stored state is not
	// terminal, so a key's open sessions are found without reading its history.
	PutBindingSession(s binding.BindingSession) error
	// DeleteBindingSession removes a binding session and its index entries, keeping only a hash of
	// its id so that SessionIDUsed still reports the id as taken; absent is not an error.
	DeleteBindingSession(id string) error
	// BindingSessionIDUsed reports whether a session with this id exists or ever existed.
	BindingSessionIDUsed(id string) (bool, error)
	// BindingSessionIDBySecret returns the id of the session whose CodeHash or TokenHash is h.
	BindingSessionIDBySecret(h [32]byte) (string, error)
	// OpenBindingSessionsByNode returns the sessions of a node key whose stored state is not
	// terminal (one whose expiry has passed but was not yet stored as EXPIRED included).
	OpenBindingSessionsByNode(key didkey.PublicKey) ([]binding.BindingSession, error)
	// EachBindingSession calls fn for every binding session until fn returns an error.
	EachBindingSession(fn func(binding.BindingSession) error) error

	// Binding returns the active binding of a node key.
	Binding(node didkey.PublicKey) (binding.Binding, error)
	// PutBinding creates or replaces (supersedes) the active binding of b.NodeKey and keeps
	// the operator index in step.
	PutBinding(b binding.Binding) error
	// BindingsByOperator returns the active bindings of an operator DID.
	BindingsByOperator(operatorDID string) ([]binding.Binding, error)
	// DeleteBinding removes the active binding of a node key and its operator index entry;
	// absent is not an error.
	DeleteBinding(node didkey.PublicKey) error
	// EachBinding calls fn for every active binding until fn returns an error.
	EachBinding(fn func(binding.Binding) error) error

	// Revocation returns the revocation of the pair (operatorDID, revocationID).
	Revocation(operatorDID, revocationID string) (Revocation, error)
	// PutRevocation creates or replaces the revocation of (r.OperatorDID, r.RevocationID).
	PutRevocation(r Revocation) error
	// RevocationCount returns the number of revocations, in constant time: a registry asks
	// it before each new one to keep the list within its bound.
	RevocationCount() (int, error)
	// DeleteRevocation removes the revocation of (operatorDID, revocationID) and counts it
	// out; absent is not an error. The registry removes only revocations that protect no
	// credential that logged in (docs/protocol.md §8.1).
	DeleteRevocation(operatorDID, revocationID string) error
	// EachRevocation calls fn for every revocation until fn returns an error.
	EachRevocation(fn func(Revocation) error) error

	// OperatorPin returns the pin of an operator DID body (docs/protocol.md §10.8).
	OperatorPin(body string) (OperatorPin, error)
	// PutOperatorPin creates or replaces the pin of p.Body. Pins are never deleted.
	PutOperatorPin(p OperatorPin) error
	// EachOperatorPin calls fn for every pin, in the order of their bodies, until fn returns
	// an error.
	EachOperatorPin(fn func(OperatorPin) error) error

	// BearerSession returns the bearer session stored under a token hash.
	BearerSession(tokenHash [32]byte) (authn.BearerSession, error)
	// PutBearerSession stores a bearer session under its token hash.
	PutBearerSession(tokenHash [32]byte, s authn.BearerSession) error
	// DeleteBearerSession removes a bearer session; absent is not an error.
	DeleteBearerSession(tokenHash [32]byte) error
	// BearerSessionsOf returns the token hashes of the bearer sessions of operatorDID.
	BearerSessionsOf(operatorDID string) ([][32]byte, error)
	// EachBearerSession calls fn for every bearer session until fn returns an error.
	EachBearerSession(fn func(tokenHash [32]byte, s authn.BearerSession) error) error

	// Counter returns the counter under key, or the zero Counter when there is none.
	Counter(key string) (Counter, error)
	// Counters returns the counters under keys, in their order, the zero Counter for a key
	// with none: what Counter returns for each, in one lookup.
	Counters(keys ...string) ([]Counter, error)
	// CountEvent counts one event at now in the counter under key: it stores c.Fail(now,
	// window), where c is what Counter(key) returns, and returns what it stored. It is one
	// step, so a store that runs Updates concurrently may increment the stored value where
	// it lies instead of reading it first. PostgreSQL compares the counter's start with now
	// to the microsecond.
	CountEvent(key string, now time.Time, window time.Duration) (Counter, error)
	// PutCounter stores a counter.
	PutCounter(key string, c Counter) error
	// DeleteCounter removes a counter; absent is not an error.
	DeleteCounter(key string) error
	// EachCounter calls fn for every counter until fn returns an error.
	EachCounter(fn func(key string, c Counter) error) error

	ChallengeConsumer

	// PutNodeRevision is PutNode returning the record's new revision in a store with a
	// [NodeFeed], and 0 in any other.
	PutNodeRevision(n Node) (uint64, error)
	// WriteTouchedNode replaces the record of n.Key with n, which differs from it in
	// LastSeen alone, without PutNode's index upkeep: a flush of touches changes no DID.
	WriteTouchedNode(n Node) error

	LogTx
}

// touchesKey marks an Update that makes durable what was already acknowledged: heartbeat
// times.
type touchesKey struct{}

// ForTouches marks an Update as one that only writes heartbeat times already acknowledged,
// as the node cache's Flush does. A store may let it use room it otherwise keeps in
// reserve, since refusing it would lose an acknowledgement, and need keep no undo log for
// it, since it fails only when the store does.
func ForTouches(ctx context.Context) context.Context {
	return context.WithValue(ctx, touchesKey{}, true)
}

// IsForTouches reports whether ctx carries the mark of [ForTouches].
func IsForTouches(ctx context.Context) bool {
	v, _ := ctx.Value(touchesKey{}).(bool)
	return v
}
