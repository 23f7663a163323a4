package registry

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/translog"
)

// The transparency log (docs/protocol.md §12). Every write a client trusts appends an entry
// in its own transaction: a node key's registration under a DID it was not registered
// under, an operator DID's pin, a binding's acceptance and its end by an unbind or a
// revocation, a revocation and its end. Heartbeats, endpoint and capability changes,
// sessions and counters are not logged: none of them is something a client takes the
// registry's word for. A binding superseded by a newer one of its node key has no entry of
// its own: the newer binding's entry says it.
//
// The log's index comes from the store transaction, so registries sharing a store write
// one log between them, and an entry is committed with its write or not at all. A
// checkpoint is a function of the log's size and the key, and Ed25519 is deterministic, so
// every registry on the store signs the same bytes for the same size: there is no
// sequencer to choose and no failover to make.

// logIndex is where an entry landed, for an answer's log_index: nil when the write logged
// nothing.
func logIndex(i int64) *int64 { return &i }

// appendEntry appends e to the log in tx, the transaction of the write it records.
func appendEntry(tx store.Tx, e translog.Entry) (*int64, error) {
	i, err := translog.Append(tx, e)
	if err != nil {
		return nil, fmt.Errorf("registry: logging a %s entry of %s: %w", e.Kind, e.DID, err)
	}
	return logIndex(i), nil
}

// signedBy renders m under prefix as the signed message of an entry, signed by signer.
func signedBy(signer didkey.PublicKey, prefix string, m canonical.Message, sig string) (translog.Signed, error) {
	b, err := m.Bytes(prefix)
	if err != nil {
		return translog.Signed{}, fmt.Errorf("registry: rendering a logged message: %w", err)
	}
	return translog.Signed{Signer: signer, Signature: sig, Message: b}, nil
}

// logRegistration appends the entry of a registration that put rec where old stood (exists
// false: no record), when it changes what a client relies on: a key registered anew, under
// another DID spelling, or signed where it was not. Endpoint, capability and region changes
// are not logged: a client checks the node it reaches by the key the DID names, and nodes
// move. m is the registration's message (with ts for v2).
func (s *Service) logRegistration(tx store.Tx, old store.Node, exists bool, rec store.Node, m canonical.Message) (*int64, error) {
	if s.logState.registrationsOff || exists && old.DID == rec.DID && (old.SignatureVerified || !rec.SignatureVerified) {
		return nil, nil
	}
	e := translog.Node(rec.DID, rec.Key, nil, "")
	if rec.SignatureVerified && rec.Signature != nil {
		signed, err := signedBy(rec.Key, s.prefix, m, *rec.Signature)
		if err != nil {
			return nil, err
		}
		e.Signed = []translog.Signed{signed}
	}
	return appendEntry(tx, e)
}

// rootProof is a message the root key signed under an operator DID, under the registry's
// prefix, and its signature: what the entry of the DID's pin carries. A login's is its
// DeviceCredential, a revocation's is itself.
type rootProof struct {
	prefix string
	m      canonical.Message
	sig    string
}

// credentialProof is the rootProof of a login with credential dc.
func (s *Service) credentialProof(dc authn.DeviceCredential) rootProof {
	return rootProof{s.prefix, dc.DeviceCredential, dc.Signature}
}

// logPin appends the entry of did's body pinned to root.
func logPin(tx store.Tx, did didkey.DID, root didkey.PublicKey, proof rootProof) error {
	signed, err := signedBy(root, proof.prefix, proof.m, proof.sig)
	if err != nil {
		return err
	}
	_, err = appendEntry(tx, translog.Pin(did.String(), root, signed.Message, signed.Signature))
	return err
}

// logBind appends the entry of the binding that session active makes, with the four
// signed messages its chain verified.
func (s *Service) logBind(tx store.Tx, active binding.BindingSession) (*int64, error) {
	dc, authz, acc := active.DeviceCredential, active.Authorization, active.Acceptance
	if dc == nil || authz == nil || acc == nil {
		return nil, errors.New("registry: logging a binding whose session lacks its chain")
	}
	root, err := didkey.DecodeKey(dc.OperatorRootPublicKey)
	if err != nil {
		return nil, err
	}
	device, err := didkey.DecodeKey(dc.DevicePublicKey)
	if err != nil {
		return nil, err
	}
	var chain [4]translog.Signed
	parts := []struct {
		by  didkey.PublicKey
		m   canonical.Message
		sig string
	}{
		{active.NodeKey, active.Request, active.NodeSignature},
		{root, dc.DeviceCredential, dc.Signature},
		{device, authz.Authorization, authz.Signature},
		{active.NodeKey, acc.Acceptance, acc.Signature},
	}
	for i, p := range parts {
		if chain[i], err = signedBy(p.by, s.prefix, p.m, p.sig); err != nil {
			return nil, err
		}
	}
	return appendEntry(tx, translog.Bind(acc.NodeDID, active.NodeKey, active.OperatorDID, active.ID, chain))
}

// logUnbind appends the entry of binding b's end by by at at, with the node's signed
// unbind when the node ended it (the entry then names the DID the node signed).
func (s *Service) logUnbind(tx store.Tx, b binding.Binding, by binding.UnboundBy, at time.Time, byNode *api.NodeUnbindRequest) (*int64, error) {
	did := b.NodeDID
	var signed *translog.Signed
	if byNode != nil {
		m := canonical.Unbind{BindingSessionID: b.SessionID, NodeDID: byNode.NodeDID, TS: byNode.TS}
		sg, err := signedBy(b.NodeKey, s.prefix, m, byNode.Signature)
		if err != nil {
			return nil, err
		}
		did, signed = byNode.NodeDID, &sg
	}
	return appendEntry(tx, translog.Unbind(did, b.NodeKey, b.OperatorDID, b.SessionID, string(by), canonical.FormatTime(at), signed))
}

// logRevoke appends the entry of a revocation, signed by its root key.
func (s *Service) logRevoke(tx store.Tx, rv authn.Revoked, r authn.SignedRevocation) (*int64, error) {
	signed, err := signedBy(rv.RootKey, s.prefix, r.Revocation, r.Signature)
	if err != nil {
		return nil, err
	}
	return appendEntry(tx, translog.Revoke(rv.OperatorDID, rv.RootKey, rv.RevocationID, signed.Message, signed.Signature))
}

// logUnrevoke appends the entry of a revocation's end.
func logUnrevoke(tx store.Tx, r store.Revocation) error {
	root, err := didkey.DecodeKey(r.RootPublicKey)
	if err != nil {
		return fmt.Errorf("registry: the root key of revocation %s/%s: %w", r.OperatorDID, r.RevocationID, err)
	}
	_, err = appendEntry(tx, translog.Unrevoke(r.OperatorDID, root, r.RevocationID))
	return err
}

// logState is the log's key, loaded from the store at first use, and the last checkpoint
// signed, which serves every request until the log grows.
type logState struct {
	// registrationsOff leaves registrations unlogged: set only by the benchmark that
	// measures what the log costs a registration (export_test.go).
	registrationsOff bool

	mu     sync.Mutex
	key    *translog.Key
	size   int64
	signed []byte
}

// LogKey returns the key that signs the log's checkpoints: the store's, made the first time
// any registry on the store needs it. Its name, the log's origin, is the configured
// LogOrigin, or by default "<prefix>.svrp/log/" and 16 hex digits of the key's public key's
// hash, which names the log apart from any other registry's.
func (s *Service) LogKey(ctx context.Context) (*translog.Key, error) {
	s.logState.mu.Lock()
	defer s.logState.mu.Unlock()
	return s.logKeyLocked(ctx)
}

func (s *Service) logKeyLocked(ctx context.Context) (*translog.Key, error) {
	if s.logState.key != nil {
		return s.logState.key, nil
	}
	seed, err := store.LogSeed(ctx, s.store)
	if err != nil {
		return nil, fmt.Errorf("registry: the log's key: %w", err)
	}
	origin := s.logOrigin
	if origin == "" {
		pub := ed25519.NewKeyFromSeed(seed[:]).Public().(ed25519.PublicKey)
		h := sha256.Sum256(pub)
		origin = fmt.Sprintf("%s.svrp/log/%x", s.prefix, h[:8])
	}
	k, err := translog.NewKey(origin, seed)
	if err != nil {
		return nil, err
	}
	s.logState.key = k
	return k, nil
}

// Checkpoint returns the log's latest checkpoint, signed.
func (s *Service) Checkpoint(ctx context.Context) ([]byte, error) {
	var head translog.Checkpoint
	s.logState.mu.Lock()
	defer s.logState.mu.Unlock()
	k, err := s.logKeyLocked(ctx)
	if err != nil {
		return nil, err
	}
	err = s.store.View(ctx, func(tx store.Tx) error {
		n, err := tx.LogSize()
		if err != nil || (n == s.logState.size && s.logState.signed != nil) {
			head.Size = n
			return err
		}
		head, err = translog.Head(tx, k.Name())
		return err
	})
	if err != nil {
		return nil, err
	}
	if head.Size != s.logState.size || s.logState.signed == nil {
		signed, err := k.SignCheckpoint(head)
		if err != nil {
			return nil, err
		}
		s.logState.size, s.logState.signed = head.Size, signed
	}
	return s.logState.signed, nil
}

// LogTile returns the tile or entry bundle at path (a C2SP tlog-tiles path below the log's
// prefix, "tile/..."), and whether it is full. A path that names no tile, or one the log
// does not hold yet, is NOT_FOUND.
func (s *Service) LogTile(ctx context.Context, path string) ([]byte, bool, error) {
	t, err := translog.ParseTilePath(path)
	if err != nil {
		return nil, false, proto.New(proto.NotFound, "no such tile")
	}
	var data []byte
	err = s.store.View(ctx, func(tx store.Tx) error {
		n, err := tx.LogSize()
		if err != nil {
			return err
		}
		data, err = translog.ReadTile(tx, n, t)
		return err
	})
	if errors.Is(err, translog.ErrBadTile) {
		return nil, false, proto.New(proto.NotFound, "no such tile")
	}
	return data, t.W == translog.TileWidth, err
}
