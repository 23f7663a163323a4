package authn

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"math"
	"sync"
	"time"

	"github.com/mr-tron/base58"

	"github.com/svrp/svrp/proto"
)

// DefaultMaxUsedChallenges is the used-set bound a [Challenger] gets when none is given:
// about a million consumed challenges, some 55 MiB when full (about 50 bytes an entry). It
// admits a sustained 3,500 logins a second, far beyond what operators need, while a flood
// beyond that costs memory no more than this.
const DefaultMaxUsedChallenges = 1 << 20

// Layout of a challenge: 24 bytes, sent as base58 like the protocol's "24 random bytes".
const (
	challengeNonceLen = 8
	challengeIDLen    = challengeNonceLen + 4 // nonce || expiry, big-endian unix seconds
	challengeMACLen   = 12
	challengeLen      = challengeIDLen + challengeMACLen
	// maxChallengeText is the longest base58 text of 24 bytes; longer input is refused
	// before decoding.
	maxChallengeText = 33
	// challengeDomain separates these MACs from any other use a caller might make of the key.
	challengeDomain = "svrp-login-challenge:v1\x00"

	ttlSeconds = int64(ChallengeTTL / time.Second)
)

// Challenger issues and consumes single-use login challenges in bounded memory. It
// implements [Challenges] and is safe for concurrent use. Create it with [NewChallenger].
//
// # Design
//
// A challenge is base58 of 24 bytes: 8 random bytes, the expiry as 4 big-endian bytes of
// unix seconds (issue time + ChallengeTTL), and the first 12 bytes of HMAC-SHA256 over them
// under a secret key. Issue therefore stores nothing, and "known" in the protocol's sense
// means "carries our MAC": no one without the key can produce a challenge that Consume
// accepts (96-bit tag). The protocol calls a challenge "base58 of 24 random bytes"; these 24
// bytes are as unpredictable to a client (64 random bits, a pseudorandom tag) and only the
// expiry is readable. Clients treat the challenge as opaque and only sign it.
//
// Consume checks the MAC and the expiry, then records the challenge in a used-set, which is
// what makes it single-use. An entry is forgotten at the challenge's expiry, when the expiry
// check alone refuses it again. So the used-set holds only challenges consumed within the
// last ChallengeTTL, and never more than maxUsed of them: memory stays bounded whatever the
// rate of Issue (which costs nothing) or of Consume.
//
// When the used-set is full even after forgetting expired entries, Consume refuses with
// BAD_CHALLENGE: it fails closed. The alternatives — accepting without recording, or
// evicting an entry that has not expired — would let a consumed challenge be used a second
// time within its TTL, which is exactly what single use forbids. Refusing only delays logins,
// by at most ChallengeTTL, and only under a flood of logins that each presented a valid
// DeviceCredential (Consume is login step 5).
//
// The key should be drawn fresh for each process (see [NewChallengeKey]) rather than
// persisted: the used-set lives in memory, so after a restart under the same key a challenge
// consumed just before it could be used again; a fresh key makes every earlier challenge
// unknown instead.
//
// The Challenger's view of time never goes back: it compares against the latest now it has
// been given, so stepping the clock back cannot revive a challenge whose used-set entry has
// already been forgotten.
type Challenger struct {
	ipad, opad [sha256.BlockSize]byte // the key, xored with the HMAC pads once

	randMu sync.Mutex // the io.Reader need not be safe for concurrent use
	rand   io.Reader

	mu      sync.Mutex
	ready   bool
	maxUsed int
	latest  int64 // the latest unix second seen, so time never goes back
	used    map[[challengeIDLen]byte]struct{}
	expiry  usedHeap // the same entries, ordered by expiry, to forget them
}

var _ Challenges = (*Challenger)(nil)

// NewChallenger returns a Challenger that MACs its challenges under key, draws their random
// part from rand (normally crypto/rand.Reader) and remembers at most maxUsed consumed
// challenges at once; maxUsed ≤ 0 means [DefaultMaxUsedChallenges].
func NewChallenger(key [32]byte, rand io.Reader, maxUsed int) *Challenger {
	if maxUsed <= 0 {
		maxUsed = DefaultMaxUsedChallenges
	}
	c := &Challenger{
		rand:    rand,
		ready:   true,
		maxUsed: maxUsed,
		used:    make(map[[challengeIDLen]byte]struct{}),
		latest:  math.MinInt64,
	}
	for i := range c.ipad {
		c.ipad[i], c.opad[i] = 0x36, 0x5c
	}
	for i, b := range key {
		c.ipad[i] ^= b
		c.opad[i] ^= b
	}
	return c
}

// NewChallengeKey draws a fresh 32-byte challenge key from rand.
func NewChallengeKey(rand io.Reader) ([32]byte, error) {
	var k [32]byte
	if rand == nil {
		return k, proto.New(proto.Internal, "no random source for the challenge key")
	}
	if _, err := io.ReadFull(rand, k[:]); err != nil {
		return [32]byte{}, proto.New(proto.Internal, "reading the challenge key failed")
	}
	return k, nil
}

// Issue returns a new challenge that Consume accepts once, until ChallengeTTL after now. It
// stores nothing. Its only errors are INTERNAL ones: a failing random source, or a clock
// outside the years 1970–2106 that the expiry field can hold.
func (c *Challenger) Issue(now time.Time) (string, error) {
	if c == nil || !c.ready {
		return "", proto.New(proto.Internal, "challenger not initialised")
	}
	c.mu.Lock()
	n := c.advance(now)
	c.mu.Unlock()
	if n < 0 || n > math.MaxUint32-ttlSeconds {
		return "", proto.New(proto.Internal, "clock outside the range a challenge can carry")
	}
	exp := n + ttlSeconds
	var raw [challengeLen]byte
	if err := c.read(raw[:challengeNonceLen]); err != nil {
		return "", err
	}
	binary.BigEndian.PutUint32(raw[challengeNonceLen:challengeIDLen], uint32(exp))
	tag := c.mac(raw[:challengeIDLen])
	copy(raw[challengeIDLen:], tag[:challengeMACLen])
	return base58.Encode(raw[:]), nil
}

func (c *Challenger) read(p []byte) error {
	c.randMu.Lock()
	defer c.randMu.Unlock()
	if c.rand == nil {
		return proto.New(proto.Internal, "challenger has no random source")
	}
	if _, err := io.ReadFull(c.rand, p); err != nil {
		return proto.New(proto.Internal, "reading random bytes for a challenge failed")
	}
	return nil
}

// Consume accepts a challenge that this Challenger issued (under its key), that has not
// expired and that has not been consumed before, and records it as consumed in the same
// locked step, so that concurrent calls for one challenge succeed exactly once. Anything
// else is BAD_CHALLENGE: text that is not base58 of 24 bytes (so any control character), a
// wrong MAC, an expiry passed or more than ChallengeTTL ahead, a second use, or a full
// used-set (see the type's documentation).
func (c *Challenger) Consume(challenge string, now time.Time) error {
	id, exp, err := c.check(challenge)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.advance(now)
	if err := checkLife(n, exp); err != nil {
		return err
	}
	c.forget(n)
	if _, ok := c.used[id]; ok {
		return badChallenge("challenge was already used")
	}
	if len(c.used) >= c.maxUsed {
		return badChallenge("too many challenges in use; try again later")
	}
	c.used[id] = struct{}{}
	c.expiry.push(usedEntry{exp: exp, id: id})
	return nil
}

// Capacity returns the bound of the used-set: how many consumed challenges it can remember.
func (c *Challenger) Capacity() int {
	if c == nil {
		return 0
	}
	return c.maxUsed
}

// Check is Consume without the used-set: it accepts a challenge issued under this
// Challenger's key that has not expired at now, and returns its id and expiry, for a caller
// that records consumption elsewhere — in a store shared by several registries, inside the
// login's transaction. Recording the id until the expiry makes the challenge single-use.
func (c *Challenger) Check(challenge string, now time.Time) (id []byte, expires time.Time, err error) {
	raw, exp, err := c.check(challenge)
	if err != nil {
		return nil, time.Time{}, err
	}
	c.mu.Lock()
	n := c.advance(now)
	c.mu.Unlock()
	if err := checkLife(n, exp); err != nil {
		return nil, time.Time{}, err
	}
	return raw[:], time.Unix(exp, 0).UTC(), nil
}

// check reads a challenge and checks its MAC.
func (c *Challenger) check(challenge string) (id [challengeIDLen]byte, exp int64, err error) {
	if c == nil || !c.ready {
		return id, 0, proto.New(proto.Internal, "challenger not initialised")
	}
	if challenge == "" || len(challenge) > maxChallengeText {
		return id, 0, badChallenge("challenge was not issued here")
	}
	raw, err := base58.Decode(challenge)
	if err != nil || len(raw) != challengeLen {
		return id, 0, badChallenge("challenge was not issued here")
	}
	tag := c.mac(raw[:challengeIDLen])
	if !hmac.Equal(raw[challengeIDLen:], tag[:challengeMACLen]) {
		return id, 0, badChallenge("challenge was not issued here")
	}
	copy(id[:], raw)
	return id, int64(binary.BigEndian.Uint32(raw[challengeNonceLen:challengeIDLen])), nil
}

// checkLife refuses a challenge expiring at exp at the unix second n.
func checkLife(n, exp int64) error {
	if n >= exp {
		return badChallenge("challenge has expired")
	}
	if n < exp-ttlSeconds { // exp ≥ 0, so this cannot overflow where exp-n could
		return badChallenge("challenge was issued later than the registry's clock")
	}
	return nil
}

// Used returns the number of consumed challenges the Challenger currently remembers: those
// consumed and not yet forgotten at their expiry. It never exceeds the bound.
func (c *Challenger) Used() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.used)
}

// advance returns now in unix seconds, but never earlier than a time seen before. c.mu is
// held.
func (c *Challenger) advance(now time.Time) int64 {
	n := now.Unix()
	if n < c.latest {
		return c.latest
	}
	c.latest = n
	return n
}

// forget drops the entries whose challenges have expired at n; Consume refuses those on
// their expiry alone. c.mu is held.
func (c *Challenger) forget(n int64) {
	for len(c.expiry) > 0 && c.expiry[0].exp <= n {
		delete(c.used, c.expiry.pop().id)
	}
}

// mac is HMAC-SHA256 under the challenge key over the domain and msg, written out over the
// precomputed pads so that it allocates nothing and needs no lock.
func (c *Challenger) mac(msg []byte) [sha256.Size]byte {
	var in [sha256.BlockSize + len(challengeDomain) + challengeIDLen]byte
	copy(in[:], c.ipad[:])
	copy(in[sha256.BlockSize:], challengeDomain)
	n := copy(in[sha256.BlockSize+len(challengeDomain):], msg)
	inner := sha256.Sum256(in[:sha256.BlockSize+len(challengeDomain)+n])
	var out [sha256.BlockSize + sha256.Size]byte
	copy(out[:], c.opad[:])
	copy(out[sha256.BlockSize:], inner[:])
	return sha256.Sum256(out[:])
}

func badChallenge(msg string) error { return ErrBadChallenge.With("%s", msg) }

// usedEntry is one consumed challenge: its id (nonce and expiry) and its expiry.
type usedEntry struct {
	exp int64
	id  [challengeIDLen]byte
}

// usedHeap is a binary min-heap of entries by expiry. Challenges are consumed in any order,
// so a queue would not keep them sorted.
type usedHeap []usedEntry

func (h *usedHeap) push(e usedEntry) {
	*h = append(*h, e)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if s[p].exp <= s[i].exp {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

func (h *usedHeap) pop() usedEntry {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(s) && s[l].exp < s[m].exp {
			m = l
		}
		if r < len(s) && s[r].exp < s[m].exp {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}
