// Package store keeps the registry's state: node records, binding sessions, active bindings,
// bearer sessions and counters. It defines the interfaces the registry needs and two
// implementations: [OpenBadger], an embedded durable store, and [NewMemory], for tests and
// for daemons that need no durability.
//
// Every read and write happens inside a transaction ([Store.View], [Store.Update]), so each
// use case of the registry — a binding transition, a challenge consumption, an activation that
// supersedes an older binding — is atomic whatever the implementation. The interface is shaped
// so that a SQL implementation shared by several daemons can follow without changing the
// registry: an Update function may be run more than once when transactions conflict, so it
// must have no effects outside its transaction.
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
// or a revocation ends) and binding sessions the registry deletes after their retention
// (whose ids stay reserved as hashes); node records and revocations are replaced, not
// deleted.
//
// # Implementations
//
// Both implementations pass the same behavioural suite, and both run Updates one at a time,
// so their functions run once and a decision taken on what a lookup did not find (no
// session to spare, no other key on a short body) still holds at commit. An implementation
// that runs Updates concurrently must keep that: serializable isolation that covers ranges
// scanned, not only records read. Both refuse a write inside View or from the function
// passed to an Each method, and a Tx used after its function returned. Each methods happen
// to visit records in key order; the interface promises no order.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/proto"
)

// ErrNotFound is returned by a lookup that finds nothing.
var ErrNotFound = errors.New("store: not found")

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
var errUnreachable = proto.New(proto.StoreUnavailable, "the registry's store cannot be reached now; retry later")

// Unavailable wraps err, a backend's failure to reach its store, as [ErrUnavailable]: the
// client reads that the store cannot be reached, errors.Is finds both ErrUnavailable and
// err, and the log line keeps err's text.
func Unavailable(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", errUnreachable, err)
}

// Store is a transactional store.
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

	// Revocation returns the revocation of the pair (operatorDID, revocationID).
	Revocation(operatorDID, revocationID string) (Revocation, error)
	// PutRevocation creates or replaces the revocation of (r.OperatorDID, r.RevocationID).
	PutRevocation(r Revocation) error
	// RevocationCount returns the number of revocations, in constant time: a registry asks
	// it before each new one to keep the list within its bound.
	RevocationCount() (int, error)

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
	Counter(key string) (binding.Counter, error)
	// Counters returns the counters under keys, in their order, the zero Counter for a key
	// with none: what Counter returns for each, in one lookup.
	Counters(keys ...string) ([]binding.Counter, error)
	// CountEvent counts one event at now in the counter under key: it stores c.Fail(now,
	// window), where c is what Counter(key) returns, and returns what it stored. It is one
	// step, so a store that runs Updates concurrently may increment the stored value where
	// it lies instead of reading it first. PostgreSQL compares the counter's start with now
	// to the microsecond.
	CountEvent(key string, now time.Time, window time.Duration) (binding.Counter, error)
	// PutCounter stores a counter.
	PutCounter(key string, c binding.Counter) error
	// DeleteCounter removes a counter; absent is not an error.
	DeleteCounter(key string) error
	// EachCounter calls fn for every counter until fn returns an error.
	EachCounter(fn func(key string, c binding.Counter) error) error
}

// CounterReader is implemented by a Store that reads counters outside any transaction for
// less than a View costs: [Postgres] reads them in one statement, where a View adds its
// BEGIN and ROLLBACK. The node cache passes the read on to the store it wraps.
type CounterReader interface {
	// ReadCounters returns what Counters would return in a View of its own.
	ReadCounters(ctx context.Context, keys ...string) ([]binding.Counter, error)
}

// Maintainer is implemented by stores that need periodic upkeep, such as the one
// [OpenBadger] returns. A daemon should check for it with a type assertion and, when
// present, call Maintain every few minutes from one goroutine. The store stays correct
// without it; only its disk use grows.
type Maintainer interface {
	// Maintain reclaims space, returning when nothing is left worth reclaiming or ctx is
	// done. Transactions may run meanwhile.
	Maintain(ctx context.Context) error
}
