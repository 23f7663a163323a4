package store

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
)

// checkSession refuses what could be written but never read back: an empty id cannot be
// looked up, and a state outside the known ones has no stored spelling, so the Badger
// encoding would fail when decoding it. The memory store checks the same so that both
// implementations fail alike.
func checkSession(s binding.BindingSession) error {
	if s.ID == "" {
		return errors.New("store: binding session without an id")
	}
	if _, err := binding.ParseState(s.State.String()); err != nil {
		return fmt.Errorf("store: binding session with state %d: %w", uint8(s.State), err)
	}
	return nil
}

// usedIDHash is what a store keeps of a deleted session's id: enough to refuse the id again,
// in a fixed 64 bytes whatever the id's length.
func usedIDHash(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:])
}

// secretHashes returns the hashes of s worth indexing: a zero hash means "no such secret"
// and must not make every such session findable under it.
func secretHashes(s binding.BindingSession) [][32]byte {
	var hs [][32]byte
	for _, h := range [...][32]byte{s.CodeHash, s.TokenHash} {
		if h != ([32]byte{}) && !slices.Contains(hs, h) {
			hs = append(hs, h)
		}
	}
	return hs
}

// The clone functions give the memory store the isolation the Badger store gets from
// encoding: a caller that keeps or changes a slice or a pointee it passed in or got back
// cannot reach stored state. Nil stays nil and empty stays empty, as JSON keeps them.

func cloneNode(n Node) Node {
	n.Capabilities = slices.Clone(n.Capabilities)
	n.Signature = clonePtr(n.Signature)
	n.RegistrationTS = clonePtr(n.RegistrationTS)
	return n
}

func cloneSession(s binding.BindingSession) binding.BindingSession {
	s.Request.RequestedTaskTypes = slices.Clone(s.Request.RequestedTaskTypes)
	s.Request.RequestedSingleLimit = clonePtr(s.Request.RequestedSingleLimit)
	s.Request.RequestedDailyLimit = clonePtr(s.Request.RequestedDailyLimit)
	if s.DeviceCredential != nil {
		c := *s.DeviceCredential
		c.Permissions = slices.Clone(c.Permissions)
		s.DeviceCredential = &c
	}
	if s.Authorization != nil {
		a := *s.Authorization
		a.TaskTypes = slices.Clone(a.TaskTypes)
		a.SingleLimit = clonePtr(a.SingleLimit)
		a.DailyLimit = clonePtr(a.DailyLimit)
		s.Authorization = &a
	}
	s.Acceptance = clonePtr(s.Acceptance)
	return s
}

func cloneBinding(b binding.Binding) binding.Binding {
	b.TaskTypes = slices.Clone(b.TaskTypes)
	b.SingleLimit = clonePtr(b.SingleLimit)
	b.DailyLimit = clonePtr(b.DailyLimit)
	return b
}

// authn.BearerSession and binding.Counter hold no references; these exist so that the day they
// do, there is one place to change and the clone test covers it.

func cloneBearerSession(s authn.BearerSession) authn.BearerSession { return s }

func cloneCounter(c binding.Counter) binding.Counter { return c }

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// txState is the life of a transaction, which both stores enforce the same way: no use after
// its function returned, no write in a View, no write from inside an Each function.
type txState struct {
	write     bool
	done      bool
	iterating int
}

func (t *txState) readable() error {
	if t.done {
		return ErrTxDone
	}
	return nil
}

func (t *txState) writable() error {
	switch {
	case t.done:
		return ErrTxDone
	case !t.write:
		return ErrWriteInView
	case t.iterating > 0:
		return ErrWriteInEach
	}
	return nil
}

// countEvent is CountEvent on a Tx whose Update runs alone, so that a read and a write in
// one transaction are one step.
func countEvent(tx Tx, key string, now time.Time, window time.Duration) (binding.Counter, error) {
	c, err := tx.Counter(key)
	if err != nil {
		return binding.Counter{}, err
	}
	c = c.Fail(now, window)
	if err := tx.PutCounter(key, c); err != nil {
		return binding.Counter{}, err
	}
	return c, nil
}

// counters is Counters made of one Counter per key.
func counters(tx Tx, keys []string) ([]binding.Counter, error) {
	out := make([]binding.Counter, len(keys))
	for i, k := range keys {
		c, err := tx.Counter(k)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}
