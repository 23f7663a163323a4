package rules

import (
	"slices"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/didkey"
)

// Indexes are the lookup entries a store keeps beside its records, as one transaction sees
// them. The functions below decide which entries a write adds and drops, once for every
// store that keeps its own indexes (memory, Badger); a store only says how an entry is read,
// written and dropped. An owner entry names the one record a name belongs to; a member entry
// puts a record in a group. Dropping an absent entry is not an error.
type Indexes interface {
	DIDOwner(did string) (k didkey.PublicKey, ok bool, err error)
	SetDIDOwner(did string, k didkey.PublicKey) error
	DropDIDOwner(did string) error
	SecretOwner(h [32]byte) (id string, ok bool, err error)
	SetSecretOwner(h [32]byte, id string) error
	DropSecretOwner(h [32]byte) error

	AddShortBody(k didkey.PublicKey) error
	DropShortBody(k didkey.PublicKey) error
	AddOpenSession(node didkey.PublicKey, id string) error
	DropOpenSession(node didkey.PublicKey, id string) error
	AddOperatorBinding(operatorDID string, node didkey.PublicKey) error
	DropOperatorBinding(operatorDID string, node didkey.PublicKey) error
	AddOperatorSession(operatorDID string, tokenHash [32]byte) error
	DropOperatorSession(operatorDID string, tokenHash [32]byte) error
	// MarkSessionIDUsed keeps the hash of a deleted session's id (UsedIDHash).
	MarkSessionIDUsed(id string) error
}

// PutNode keeps the indexes in step with a node record of k put under did over one
// registered under *oldDID (nil: there was no record). A DID stays with the key that put it
// last: the old DID's entry is dropped only while it still names k.
func PutNode(ix Indexes, k didkey.PublicKey, oldDID *string, did string) error {
	if oldDID == nil || *oldDID != did {
		if oldDID != nil && *oldDID != "" {
			if err := dropOwned(ix.DIDOwner, ix.DropDIDOwner, *oldDID, k); err != nil {
				return err
			}
		}
		if did != "" {
			if err := ix.SetDIDOwner(did, k); err != nil {
				return err
			}
		}
	}
	if oldDID == nil {
		return ix.AddShortBody(k)
	}
	return nil
}

// DeleteNode drops the index entries of the record of k registered under did: its DID
// entry while that still names k, and its short-body entry.
func DeleteNode(ix Indexes, k didkey.PublicKey, did string) error {
	if did != "" {
		if err := dropOwned(ix.DIDOwner, ix.DropDIDOwner, did, k); err != nil {
			return err
		}
	}
	return ix.DropShortBody(k)
}

// PutSession keeps the indexes in step with s put over old (nil: there was none). The
// node-key entry exists while the stored state is not terminal; it is dropped also when the
// old state was terminal, so that an entry left by a store written before the index held
// only open sessions goes the first time the session is put again.
func PutSession(ix Indexes, old *binding.BindingSession, s binding.BindingSession) error {
	hashes := SecretHashes(s)
	if old != nil {
		for _, h := range SecretHashes(*old) {
			if slices.Contains(hashes, h) {
				continue
			}
			if err := dropOwned(ix.SecretOwner, ix.DropSecretOwner, h, s.ID); err != nil {
				return err
			}
		}
		if old.NodeKey != s.NodeKey {
			if err := ix.DropOpenSession(old.NodeKey, s.ID); err != nil {
				return err
			}
		}
	}
	for _, h := range hashes {
		if owner, ok, err := ix.SecretOwner(h); err != nil {
			return err
		} else if !ok || owner != s.ID {
			if err := ix.SetSecretOwner(h, s.ID); err != nil {
				return err
			}
		}
	}
	open := !s.State.Terminal()
	switch {
	case open && (old == nil || old.NodeKey != s.NodeKey || old.State.Terminal()):
		return ix.AddOpenSession(s.NodeKey, s.ID)
	case !open && old != nil:
		return ix.DropOpenSession(s.NodeKey, s.ID)
	}
	return nil
}

// DeleteSession drops the entries of old, a session being deleted, and reserves its id.
func DeleteSession(ix Indexes, old binding.BindingSession) error {
	for _, h := range SecretHashes(old) {
		if err := dropOwned(ix.SecretOwner, ix.DropSecretOwner, h, old.ID); err != nil {
			return err
		}
	}
	if err := ix.DropOpenSession(old.NodeKey, old.ID); err != nil {
		return err
	}
	return ix.MarkSessionIDUsed(old.ID)
}

// PutBinding keeps the operator entry in step with b put over old (nil: there was none).
func PutBinding(ix Indexes, old *binding.Binding, b binding.Binding) error {
	if old != nil && old.OperatorDID == b.OperatorDID {
		return nil
	}
	if old != nil && old.OperatorDID != "" {
		if err := ix.DropOperatorBinding(old.OperatorDID, b.NodeKey); err != nil {
			return err
		}
	}
	if b.OperatorDID != "" {
		return ix.AddOperatorBinding(b.OperatorDID, b.NodeKey)
	}
	return nil
}

// DeleteBinding drops the operator entry of old, a binding being deleted.
func DeleteBinding(ix Indexes, old binding.Binding) error {
	if old.OperatorDID == "" {
		return nil
	}
	return ix.DropOperatorBinding(old.OperatorDID, old.NodeKey)
}

// PutBearerSession keeps the operator entry in step with s put under tokenHash over old
// (nil: there was none).
func PutBearerSession(ix Indexes, tokenHash [32]byte, old *authn.BearerSession, s authn.BearerSession) error {
	if old != nil && old.OperatorDID != s.OperatorDID {
		if err := ix.DropOperatorSession(old.OperatorDID, tokenHash); err != nil {
			return err
		}
	}
	return ix.AddOperatorSession(s.OperatorDID, tokenHash)
}

// dropOwned drops the owner entry of name while it still names owner: another record may
// have taken the name since.
func dropOwned[N, O comparable](get func(N) (O, bool, error), drop func(N) error, name N, owner O) error {
	cur, ok, err := get(name)
	if err != nil || !ok || cur != owner {
		return err
	}
	return drop(name)
}
