package translog

import (
	"fmt"

	"github.com/svrp/svrp/didkey"
)

// State is what a log says a client may rely on, replayed from its entries in order: the key
// each DID was last registered with, the root key each operator DID body is pinned to, each
// binding and whether it still stands, and the revocations in force. A monitor compares it
// with what the registry serves.
type State struct {
	// Nodes maps a node DID, as registered, to the key of its latest registration.
	Nodes map[string]didkey.PublicKey
	// Pins maps an operator DID body to its root key.
	Pins map[string]didkey.PublicKey
	// Bindings maps a binding session id to its binding.
	Bindings map[string]*Binding
	// Revocations maps an operator DID and revocation id to the revocation's entry, while no
	// unrevoke entry ended it.
	Revocations map[[2]string]Entry

	current map[didkey.PublicKey]string // node key → session of its standing binding
}

// Binding is a binding as the log tells it.
type Binding struct {
	NodeKey     didkey.PublicKey
	OperatorDID string
	// Index is the bind entry's; EndedBy is "" while the binding stands, else the unbind
	// entry's by, or "superseded" when a newer binding of the node key replaced it.
	Index   int64
	EndedBy string
}

// NewState returns the state of an empty log.
func NewState() *State {
	return &State{
		Nodes: map[string]didkey.PublicKey{}, Pins: map[string]didkey.PublicKey{},
		Bindings: map[string]*Binding{}, Revocations: map[[2]string]Entry{},
		current: map[didkey.PublicKey]string{},
	}
}

// Apply replays entry i, which must have passed [Entry.Check]. It returns an error for an
// entry the log before it contradicts: a pin of a pinned body to another root key, an
// unbind of a binding that does not stand, an unrevoke of no revocation. The entry is
// applied all the same, as the registry did.
func (s *State) Apply(i int64, e Entry) error {
	key := func(name string) didkey.PublicKey {
		v, _ := e.Field(name)
		k, _ := didkey.DecodeKey(v)
		return k
	}
	switch e.Kind {
	case KindNode:
		s.Nodes[e.DID] = key("key")
	case KindPin:
		d, _ := didkey.Parse(e.DID)
		root := key("root_key")
		old, pinned := s.Pins[d.Body()]
		if !pinned {
			s.Pins[d.Body()] = root
		} else if old != root {
			return fmt.Errorf("entry %d pins %s to %s, pinned to %s before", i, e.DID, root.Base58(), old.Base58())
		}
	case KindBind:
		node := key("key")
		op, _ := e.Field("operator")
		id, _ := e.Field("session")
		if prev, ok := s.current[node]; ok && prev != id {
			s.Bindings[prev].EndedBy = "superseded"
		}
		s.Bindings[id] = &Binding{NodeKey: node, OperatorDID: op, Index: i}
		s.current[node] = id
	case KindUnbind:
		id, _ := e.Field("session")
		by, _ := e.Field("by")
		b, ok := s.Bindings[id]
		if !ok || b.EndedBy != "" {
			return fmt.Errorf("entry %d ends binding %s, which does not stand", i, id)
		}
		b.EndedBy = by
		delete(s.current, b.NodeKey)
	case KindRevoke:
		id, _ := e.Field("revocation_id")
		s.Revocations[[2]string{e.DID, id}] = e
	case KindUnrevoke:
		id, _ := e.Field("revocation_id")
		if _, ok := s.Revocations[[2]string{e.DID, id}]; !ok {
			return fmt.Errorf("entry %d ends revocation %s of %s, which is not in force", i, id, e.DID)
		}
		delete(s.Revocations, [2]string{e.DID, id})
	default:
		return fmt.Errorf("entry %d is of unknown kind %q", i, e.Kind)
	}
	return nil
}
