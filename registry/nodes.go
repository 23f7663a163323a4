package registry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/svrp/svrp/registry/budget"
	"github.com/svrp/svrp/registry/limits"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/admission"
	"github.com/svrp/svrp/registry/answers"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/netblock"
	"github.com/svrp/svrp/sigverify"
	"github.com/svrp/svrp/store"
)

// Field limits of docs/protocol.md §8.
const (
	maxTextBytes = 256 // endpoint, device_summary, os, region, ids, nonce
	maxListItems = 64  // capabilities, task types, permissions
	maxItemBytes = 64
)

// Register records a node's announcement (docs/protocol.md §5.1, and §10.1–10.2 for
// replays). addr is the client address, used only for the limit on new keys per address.
func (s *Service) Register(ctx context.Context, req api.RegisterRequest, addr string) (api.RegisterResult, error) {
	did, key, err := didkey.CheckNode(req.DID, req.PublicKey)
	if err != nil {
		return api.RegisterResult{}, err
	}
	if !sigverify.KeyAllowed(key[:]) {
		return api.RegisterResult{}, proto.New(proto.IDBindingFailed, "public_key is a small-order point or a non-canonical encoding: no signature under it is accepted (docs/protocol.md §1.1)")
	}
	if err := checkRegisterFields(req); err != nil {
		return api.RegisterResult{}, err
	}
	now := s.now()
	if err := s.loadNodes(ctx); err != nil {
		return api.RegisterResult{}, err
	}
	if err := s.nodeRoom(ctx, key, addr, now); err != nil {
		return api.RegisterResult{}, err
	}
	// Everything the signature decides is settled before the write transaction; its errors
	// are returned there, after the collision check, in the protocol's order.
	var verified bool
	var v2err error
	v1msg := canonical.Register{
		DID: req.DID, PublicKey: key.Base58(), Endpoint: req.Endpoint,
		Capabilities: req.Capabilities, Region: req.Region,
	}
	if req.TS != nil {
		v2err = checkRegisterV2(s.verifier, key, s.prefix, v1msg, *req.TS, req.Signature, now)
		verified = v2err == nil
	} else {
		verified = req.Signature != nil && canonical.VerifyWith(s.verifier, key, s.prefix, v1msg, *req.Signature) == nil
	}
	var rec store.Node
	var logged *int64
	var changed, added bool
	var displaced *store.Node
	// A new key's place in the node table, taken once however often the transaction runs,
	// and settled after it.
	var place *admission.Reservation[didkey.PublicKey]
	defer func() {
		switch {
		case place == nil:
		case added:
			place.Commit(key, now, time.Time{})
		default:
			place.Cancel()
		}
	}()
	err = s.store.Update(ctx, func(tx store.Tx) error {
		changed, added, displaced, logged = false, false, nil, nil
		old, err := tx.Node(key)
		exists := err == nil
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if did.Form() == didkey.FormShort {
			holders, err := tx.NodeKeysByShortBody(did.Body())
			if err != nil {
				return err
			}
			for _, h := range holders {
				if h != key {
					return proto.New(proto.DIDCollision, "short DID body already held by another key; register under the 10-hex or full DID")
				}
			}
		}
		if req.TS != nil {
			if v2err != nil {
				return v2err
			}
			if exists && old.RegistrationTS != nil {
				switch {
				case *req.TS == *old.RegistrationTS && old.Signature != nil && *old.Signature == *req.Signature:
					rec = old // a client's retry: answered with what it already did
					return nil
				case *req.TS <= *old.RegistrationTS:
					return proto.New(proto.StaleTS, "ts is not newer than the node's last registration")
				}
			}
		} else if exists {
			if old.RegistrationTS != nil {
				return proto.New(proto.BadSignature, "this node registers with a signed ts (v2); a v1 registration is refused")
			}
			if sameV1(old, v1msg, req.Signature, s.prefix) {
				rec = old // a replay, or the node repeating itself: freshness comes from heartbeats
				return nil
			}
		}
		if !verified && (s.strict || (exists && old.SignatureVerified)) {
			return proto.New(proto.BadSignature, "registration signature does not verify")
		}
		block := netblock.BlockOf(addr)
		counterKey, blockKey := "register/"+addr, "register/"+block
		var c, cb store.Counter
		if !exists {
			if c, err = tx.Counter(counterKey); err != nil {
				return err
			}
			if cb, err = tx.Counter(blockKey); err != nil {
				return err
			}
			if c.Blocked(now, s.limits.RegisterAddressLimit, limits.RegisterWindow) {
				return budget.RateLimited(budget.LimitRegisterPerAddress, "too many new node keys from this address; try again later")
			}
			if cb.Blocked(now, budget.BlockLimit(s.limits.RegisterAddressLimit, s.limits.AddressBlockFactor), limits.RegisterWindow) {
				return budget.RateLimited(budget.LimitRegisterPerBlock, "too many new node keys from this address block; try again later")
			}
			if place == nil {
				place = s.tables.nodes.Reserve(addr, now)
			}
			if displaced, err = s.placeNode(tx, place, now); err != nil {
				return err
			}
		}
		rec = store.Node{
			Key: key, DID: req.DID, Endpoint: req.Endpoint,
			Capabilities: slices.Clone(req.Capabilities), Region: req.Region,
			Signature: req.Signature, SignatureVerified: verified,
			FirstSeen: now, LastSeen: now, Origin: addr,
		}
		if req.TS != nil {
			ts := *req.TS
			rec.RegistrationTS = &ts
		}
		if exists {
			rec.FirstSeen, rec.Origin = old.FirstSeen, old.Origin
		} else if err := tx.PutCounter(counterKey, c.Fail(now, limits.RegisterWindow)); err != nil {
			return err
		} else if err := tx.PutCounter(blockKey, cb.Fail(now, limits.RegisterWindow)); err != nil {
			return err
		}
		changed, added = true, !exists
		if err := tx.PutNode(rec); err != nil {
			return err
		}
		var m canonical.Message = v1msg
		if req.TS != nil {
			m = registerV2(v1msg, *req.TS)
		}
		logged, err = s.logRegistration(tx, old, exists, rec, m)
		return err
	})
	if err != nil {
		changed, added = false, false
		return api.RegisterResult{}, err
	}
	if displaced != nil {
		s.log.Info("stale node displaced", "did", displaced.DID, "last_seen", displaced.LastSeen, "by_block", netblock.BlockOf(addr))
	}
	if changed {
		s.nodesChanged()
		s.log.Debug("node registered", "did", req.DID, "signed", verified, "v2", req.TS != nil)
	}
	return api.RegisterResult{OK: true, Registered: true, Signed: rec.SignatureVerified, IDBound: true, Data: answers.NodeView(rec), LogIndex: logged}, nil
}

// registerV2 is message 10: m's fields and ts.
func registerV2(m canonical.Register, ts int64) canonical.RegisterV2 {
	return canonical.RegisterV2{DID: m.DID, PublicKey: m.PublicKey, Endpoint: m.Endpoint, Capabilities: m.Capabilities, Region: m.Region, TS: ts}
}

// checkRegisterV2 applies the checks of docs/protocol.md §10.1 that need no stored state: the
// ts lies within 300 s of now (STALE_TS), and the signature over message 10 verifies, grace
// mode or not (BAD_SIGNATURE).
func checkRegisterV2(v sigverify.Verifier, key didkey.PublicKey, prefix string, m canonical.Register, ts int64, sig *string, now time.Time) error {
	if d := now.Unix() - ts; d > int64(authn.NodeTSTolerance/time.Second) || d < -int64(authn.NodeTSTolerance/time.Second) {
		return proto.New(proto.StaleTS, "ts is more than 300 s from registry time")
	}
	if sig == nil {
		return proto.New(proto.BadSignature, "a registration with ts must be signed")
	}
	if err := canonical.VerifyWith(v, key, prefix, registerV2(m, ts), *sig); err != nil {
		if proto.CodeOf(err) == proto.BadRequest {
			return err
		}
		return proto.New(proto.BadSignature, "registration signature does not verify")
	}
	return nil
}

// sameV1 reports whether a v1 registration repeats the stored record exactly (docs/protocol.md
// §10.2): the same signed bytes and the same signature string. An unsigned registration
// repeats nothing: it carries no signature string to compare, and grace mode lets anyone send
// it anyway.
func sameV1(old store.Node, m canonical.Register, sig *string, prefix string) bool {
	if sig == nil || old.Signature == nil || *sig != *old.Signature {
		return false
	}
	prev := canonical.Register{DID: old.DID, PublicKey: m.PublicKey, Endpoint: old.Endpoint, Capabilities: old.Capabilities, Region: old.Region}
	a, err1 := prev.Bytes(prefix)
	b, err2 := m.Bytes(prefix)
	return err1 == nil && err2 == nil && bytes.Equal(a, b)
}

func checkRegisterFields(req api.RegisterRequest) error {
	if err := checkText("endpoint", req.Endpoint); err != nil {
		return err
	}
	if req.Signature != nil && len(*req.Signature) > limits.MaxSignatureBytes {
		return badRequest("field signature must be at most 256 bytes")
	}
	if strings.IndexFunc(req.Endpoint, isSpace) >= 0 {
		return badRequest("field endpoint must not contain whitespace")
	}
	if req.Region != "" {
		if err := checkText("region", req.Region); err != nil {
			return err
		}
	}
	return checkList("capabilities", req.Capabilities)
}

// isSpace is the protocol's whitespace for endpoints: U+0020, U+0085, U+00A0 and the
// categories Zs, Zl and Zp.
func isSpace(r rune) bool {
	return r == ' ' || r == '\u0085' || r == '\u00a0' || unicode.In(r, unicode.Zs, unicode.Zl, unicode.Zp)
}

// checkText applies the injectivity rule and the 1–256 byte limit to a present string.
func checkText(field, v string) error {
	if err := canonical.CheckString(field, v); err != nil {
		return err
	}
	if len(v) == 0 || len(v) > maxTextBytes {
		return badRequest(fmt.Sprintf("field %s must be 1-256 bytes", field))
	}
	return nil
}

// checkList applies the injectivity rule and the 64 × 64-byte limit to a list.
func checkList(field string, items []string) error {
	if err := canonical.CheckList(field, items); err != nil {
		return err
	}
	if len(items) > maxListItems {
		return badRequest(fmt.Sprintf("field %s has more than 64 items", field))
	}
	for _, it := range items {
		if len(it) > maxItemBytes {
			return badRequest(fmt.Sprintf("field %s has an item over 64 bytes", field))
		}
	}
	return nil
}

// Heartbeat refreshes a registered node's last_seen (docs/protocol.md §5.1, §10.3); addr is
// the client address (package registry/limits). The DID is parsed once and bound once: the key is the
// one registered under it, so only freshness and the signature are left to check, and a
// heartbeat the key's mark already settles (an older ts, or a repeat) is answered without
// verifying it — unless it is a replay from another address than the accepted heartbeat's
// and that address or its block has spent its budget of replays, which refuses it.
func (s *Service) Heartbeat(ctx context.Context, req api.HeartbeatRequest, addr string) (api.HeartbeatResult, error) {
	did, err := parseNodeDID(req.DID)
	if err != nil {
		return api.HeartbeatResult{}, err
	}
	if req.PublicKey != nil {
		if _, err := did.Bind(*req.PublicKey); err != nil {
			return api.HeartbeatResult{}, err
		}
	}
	now := s.now()
	var key didkey.PublicKey
	err = s.store.View(ctx, func(tx store.Tx) error {
		rec, err := lookupNode(tx, did)
		key = rec.Key
		return err
	})
	if err != nil {
		return api.HeartbeatResult{}, err
	}
	proof := budget.ProofOf(req.DID, req.Signature)
	if done, elsewhere, seen, err := s.heartbeats.Answered(key, req.TS, proof, s.nodeChecker.Fresh(req.TS), addr); done {
		if elsewhere {
			if byAddr, byBlock := s.replays.Take(addr, s.limits.HeartbeatReplayAddressLimit, now); byAddr || byBlock {
				return api.HeartbeatResult{}, budget.RateLimited(budget.Pick(byBlock, budget.LimitHeartbeatReplaysPerBlock, budget.LimitHeartbeatReplaysPerAddress),
					"too many replayed heartbeats from this address; wait before sending more")
			}
		}
		if err != nil {
			return api.HeartbeatResult{}, err
		}
		return api.HeartbeatResult{OK: true, LastSeen: canonical.FormatTime(seen)}, nil
	}
	msg := canonical.Heartbeat{DID: req.DID, TS: req.TS}
	if err := s.nodeChecker.CheckBound(key, msg, req.Signature); err != nil {
		return api.HeartbeatResult{}, err
	}
	fresh, seen, err := s.heartbeats.Advance(key, req.TS, proof, now, addr)
	if err != nil || !fresh {
		return api.HeartbeatResult{OK: err == nil, LastSeen: canonical.FormatTime(seen)}, err
	}
	if err := s.touch(ctx, key, now); err != nil {
		return api.HeartbeatResult{}, err
	}
	return api.HeartbeatResult{OK: true, LastSeen: canonical.FormatTime(now)}, nil
}

// touch moves a node's last_seen to now. A store that keeps the node table in memory records
// it there and makes it durable within a second (its Flush); any other store writes it now.
func (s *Service) touch(ctx context.Context, key didkey.PublicKey, now time.Time) error {
	err := s.store.TouchNode(ctx, key, now)
	if errors.Is(err, store.ErrNotFound) {
		return proto.New(proto.UnknownDID, "no node is registered under this DID")
	}
	if err == nil {
		s.touches.Add(1)
	}
	return err
}

// parseNodeDID checks the grammar of a node DID (docs/protocol.md §2 codes). A DID with a
// control character fails the grammar and gets ID_BINDING_FAILED, not the 400 that the
// protocol's injectivity preamble could be read to ask for: heartbeat, poll and node cancel
// list the DID check first, as register does (dids.json, trailing-lf), and a DID refused
// here is never signed over, so no two messages can share bytes through it.
func parseNodeDID(s string) (didkey.DID, error) {
	d, err := didkey.Parse(s)
	if err != nil {
		return didkey.DID{}, err
	}
	if d.IsOperator() {
		return didkey.DID{}, proto.New(proto.IDBindingFailed, "an operator DID is not a node DID")
	}
	return d, nil
}

// lookupNode finds the record a DID spelling names (docs/protocol.md §2): the full form names
// its key; a shorter form names the record registered under exactly that DID or, failing
// that, the one key it binds to among the records sharing its short body.
func lookupNode(tx store.Tx, d didkey.DID) (store.Node, error) {
	unknown := func() error { return proto.New(proto.UnknownDID, "no node is registered under this DID") }
	if k, ok := d.Key(); ok {
		rec, err := tx.Node(k)
		if errors.Is(err, store.ErrNotFound) {
			return store.Node{}, unknown()
		}
		return rec, err
	}
	k, err := tx.NodeKeyByDID(d.String())
	if err == nil {
		return tx.Node(k)
	}
	if !errors.Is(err, store.ErrNotFound) {
		return store.Node{}, err
	}
	holders, err := tx.NodeKeysByShortBody(d.Body()[:8])
	if err != nil {
		return store.Node{}, err
	}
	var found []didkey.PublicKey
	for _, h := range holders {
		if d.Matches(h) {
			found = append(found, h)
		}
	}
	if len(found) != 1 {
		return store.Node{}, unknown()
	}
	return tx.Node(found[0])
}

// NodeCount returns the number of registered nodes.
func (s *Service) NodeCount(ctx context.Context) (int, error) {
	var n int
	err := s.store.View(ctx, func(tx store.Tx) (err error) {
		n, err = tx.NodeCount()
		return err
	})
	return n, err
}

// StoreHealth returns what the store says about its disk: the zero Health when it watches
// none (a memory store).
func (s *Service) StoreHealth() store.Health {
	return s.store.Health()
}

func badRequest(msg string) error { return proto.New(proto.BadRequest, msg) }
