package budget

import (
	"crypto/sha256"
	"hash/maphash"
	"sync"
	"time"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/proto"
)

// MarkTTL is how long a key's last heartbeat ts is remembered (docs/protocol.md §10.3):
// beyond the ts tolerance, any older ts is refused as STALE_TS anyway, so the mark can go and
// the table holds only the keys that sent a heartbeat within it.
const MarkTTL = 600 * time.Second

// HeartbeatMarks remembers, per node key, the ts of the last accepted heartbeat and the
// last_seen it set (docs/protocol.md §10.3), so that a captured heartbeat replayed within the ts
// tolerance changes nothing. It lives in memory only: after a restart it starts afresh, and
// several daemons on one database each keep their own.
type HeartbeatMarks struct {
	mu    sync.Mutex
	marks map[didkey.PublicKey]heartbeatMark
	seed  maphash.Seed // of the senders' hashes; set with marks
}

type heartbeatMark struct {
	ts    int64
	seen  int64          // unix seconds of the last_seen that ts set
	proof HeartbeatProof // of the heartbeat that set it
	from  uint64         // the client address it came from, hashed so that a mark stays small
}

// sender is the hash of a client address that a mark keeps. The caller holds mu, and marks
// exist.
func (h *HeartbeatMarks) sender(addr string) uint64 { return maphash.String(h.seed, addr) }

// HeartbeatProof identifies a verified heartbeat by its DID spelling and signature, which
// with its ts are all that vary between heartbeats of one key: the first 16 bytes of their
// SHA-256, so that a mark stays small.
type HeartbeatProof [16]byte

// ProofOf is the proof of a heartbeat of DID spelling did with signature sig.
func ProofOf(did, sig string) HeartbeatProof {
	// A DID and a signature within their caps fit the buffer, so a heartbeat's proof costs
	// no allocation.
	var buf [512]byte
	sum := sha256.Sum256(append(append(append(buf[:0], did...), 0), sig...))
	return HeartbeatProof(sum[:16])
}

// Answered settles a heartbeat of key from its mark alone, before its signature is verified,
// where verifying could change nothing: an older ts is STALE_TS (a freshness failure, like
// the ts window), and a repeat of the heartbeat that set the mark, within the window, is
// answered with the last_seen it set. Anything else (done = false) is verified and then
// advanced. A replayed heartbeat so costs the registry a lookup, not a verification.
// inWindow says whether ts is within the ts window (authn.NodeChecker.Fresh); elsewhere, for
// a settled heartbeat, whether addr is another client address than the one the mark's
// heartbeat came from: a replay by a third party rather than the node's own retry.
func (h *HeartbeatMarks) Answered(key didkey.PublicKey, ts int64, proof HeartbeatProof, inWindow bool, addr string) (done, elsewhere bool, seen time.Time, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m, ok := h.marks[key]
	switch {
	case !ok:
		return false, false, time.Time{}, nil
	case ts < m.ts:
		return true, h.sender(addr) != m.from, time.Time{}, proto.New(proto.StaleTS, "ts is older than the node's last heartbeat")
	case ts == m.ts && proof == m.proof && inWindow:
		return true, h.sender(addr) != m.from, time.Unix(m.seen, 0).UTC(), nil
	}
	return false, false, time.Time{}, nil
}

// Advance records ts for key, sent from addr, when it is newer than the last one. It returns
// fresh = true when the heartbeat may move last_seen; an equal ts returns fresh = false with
// the last_seen the first one set; an older ts is STALE_TS.
func (h *HeartbeatMarks) Advance(key didkey.PublicKey, ts int64, proof HeartbeatProof, now time.Time, addr string) (fresh bool, seen time.Time, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m, ok := h.marks[key]
	switch {
	case ok && ts < m.ts:
		return false, time.Time{}, proto.New(proto.StaleTS, "ts is older than the node's last heartbeat")
	case ok && ts == m.ts:
		return false, time.Unix(m.seen, 0).UTC(), nil
	}
	if h.marks == nil {
		h.marks, h.seed = map[didkey.PublicKey]heartbeatMark{}, maphash.MakeSeed()
	}
	h.marks[key] = heartbeatMark{ts: ts, seen: now.Unix(), proof: proof, from: h.sender(addr)}
	return true, now, nil
}

// Prune forgets marks older than MarkTTL: any ts they could refuse is outside the ts
// tolerance by then.
func (h *HeartbeatMarks) Prune(now time.Time) {
	cut := now.Add(-MarkTTL).Unix()
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, m := range h.marks {
		if m.ts < cut {
			delete(h.marks, k)
		}
	}
}

// Len is the number of keys remembered.
func (h *HeartbeatMarks) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.marks)
}
