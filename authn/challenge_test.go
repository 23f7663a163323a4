package authn_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/mr-tron/base58"
	"pgregory.net/rapid"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
)

func issue(t testing.TB, ch *authn.Challenger, now time.Time) string {
	t.Helper()
	c, err := ch.Issue(now)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestChallengeOnce(t *testing.T) {
	ch := seededChallenger(t, 0)
	c := issue(t, ch, testNow)
	wantCode(t, ch.Consume(c, testNow), "")
	wantCode(t, ch.Consume(c, testNow), proto.BadChallenge)
	wantCode(t, ch.Consume(c, testNow.Add(time.Minute)), proto.BadChallenge)
	if !errors.Is(ch.Consume(c, testNow), authn.ErrBadChallenge) {
		t.Error("a second use does not match ErrBadChallenge")
	}
}

// TestChallengeFormat pins the wire form: base58 of 24 bytes, nonce || expiry || the first
// 12 bytes of HMAC-SHA256 over a domain string and the first 12 bytes.
func TestChallengeFormat(t *testing.T) {
	key := sha256.Sum256([]byte("k"))
	ch := authn.NewChallenger(key, seededRand(t), 0)
	for range 200 {
		c := issue(t, ch, testNow)
		if len(c) > 33 {
			t.Fatalf("challenge %q longer than base58 of 24 bytes", c)
		}
		raw, err := base58.Decode(c)
		if err != nil || len(raw) != 24 {
			t.Fatalf("challenge %q is not base58 of 24 bytes", c)
		}
		if exp := binary.BigEndian.Uint32(raw[8:12]); int64(exp) != testNow.Unix()+300 {
			t.Fatalf("expiry field %d, want %d", exp, testNow.Unix()+300)
		}
		m := hmac.New(sha256.New, key[:])
		m.Write([]byte("svrp-login-challenge:v1\x00"))
		m.Write(raw[:12])
		if !bytes.Equal(m.Sum(nil)[:12], raw[12:]) {
			t.Fatalf("challenge %q does not carry HMAC-SHA256 of its first 12 bytes", c)
		}
	}
}

func TestChallengeUnpredictable(t *testing.T) {
	ch := seededChallenger(t, 0)
	seen := map[string]bool{}
	for range 1000 {
		c := issue(t, ch, testNow)
		if seen[c] {
			t.Fatalf("challenge %q issued twice", c)
		}
		seen[c] = true
	}
}

// TestChallengeExpiry: usable until 300 s after issue, not at 300 s.
func TestChallengeExpiry(t *testing.T) {
	tests := []struct {
		after time.Duration
		want  proto.Code
	}{
		{0, ""},
		{time.Second, ""},
		{299 * time.Second, ""},
		{299*time.Second + 999*time.Millisecond, ""},
		{300 * time.Second, proto.BadChallenge},
		{301 * time.Second, proto.BadChallenge},
		{24 * time.Hour, proto.BadChallenge},
	}
	for _, tt := range tests {
		t.Run(tt.after.String(), func(t *testing.T) {
			ch := seededChallenger(t, 0)
			c := issue(t, ch, testNow)
			wantCode(t, ch.Consume(c, testNow.Add(tt.after)), tt.want)
		})
	}
}

func TestChallengeNotOurs(t *testing.T) {
	ch := seededChallenger(t, 0)
	good := issue(t, ch, testNow)
	raw, _ := base58.Decode(good)
	flip := func(i int) string {
		b := bytes.Clone(raw)
		b[i] ^= 1
		return base58.Encode(b)
	}
	otherKey := authn.NewChallenger([32]byte{9}, seededRand(t), 0)
	tests := map[string]string{
		"empty":                  "",
		"not base58":             "0OIl0OIl0OIl0OIl0OIl0OIl",
		"control character":      good[:5] + "\n" + good[5:],
		"trailing LF":            good + "\n",
		"leading space":          " " + good,
		"23 bytes":               base58.Encode(raw[:23]),
		"25 bytes":               base58.Encode(append(bytes.Clone(raw), 0)),
		"leading 1 (extra 0x00)": "1" + good,
		"34 characters":          strings.Repeat("z", 34),
		"very long":              strings.Repeat("2", 70000),
		"flipped nonce":          flip(0),
		"flipped expiry":         flip(11),
		"flipped MAC":            flip(23),
		"other key":              issue(t, otherKey, testNow),
		"non-ASCII":              "ÿ" + good[2:],
		"zero bytes":             base58.Encode(make([]byte, 24)),
	}
	for name, c := range tests {
		t.Run(name, func(t *testing.T) {
			err := ch.Consume(c, testNow)
			wantCode(t, err, proto.BadChallenge)
			if c != "" && len(c) < 100 && strings.Contains(err.Error(), c) {
				t.Errorf("error %q repeats the challenge", err)
			}
		})
	}
	wantCode(t, ch.Consume(good, testNow), "")
}

// TestChallengeExactlyOnce: of 64 goroutines racing to consume one challenge, one wins.
func TestChallengeExactlyOnce(t *testing.T) {
	ch := seededChallenger(t, 0)
	for round := range 20 {
		c := issue(t, ch, testNow)
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			mu    sync.Mutex
			wins  int
		)
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if ch.Consume(c, testNow) == nil {
					mu.Lock()
					wins++
					mu.Unlock()
				}
			}()
		}
		close(start)
		wg.Wait()
		if wins != 1 {
			t.Fatalf("round %d: %d goroutines consumed one challenge", round, wins)
		}
	}
}

// TestChallengeConcurrentIssue: Issue and Consume may be called from many goroutines, with a
// random source that is not itself safe for concurrent use.
func TestChallengeConcurrentIssue(t *testing.T) {
	ch := seededChallenger(t, 0)
	testkit.Together(16, func(int) {
		for range 50 {
			c, err := ch.Issue(testNow)
			if err != nil {
				t.Error(err)
				return
			}
			if err := ch.Consume(c, testNow); err != nil {
				t.Error(err)
				return
			}
		}
	})
	if ch.Used() != 16*50 {
		t.Fatalf("Used() = %d, want %d", ch.Used(), 16*50)
	}
}

// TestChallengeBounded fills the used-set to its cap: further consumes are refused (fail
// closed) without burning the challenge, and entries are forgotten at their expiry, after
// which there is room again.
func TestChallengeBounded(t *testing.T) {
	const capacity = 8
	ch := seededChallenger(t, capacity)
	var first []string
	for range capacity {
		c := issue(t, ch, testNow)
		wantCode(t, ch.Consume(c, testNow), "")
		first = append(first, c)
	}
	if ch.Used() != capacity {
		t.Fatalf("Used() = %d, want %d", ch.Used(), capacity)
	}
	later := testNow.Add(10 * time.Second)
	extra := issue(t, ch, later)
	wantCode(t, ch.Consume(extra, later), proto.BadChallenge)
	if ch.Used() != capacity {
		t.Fatalf("Used() = %d after a refusal, want %d", ch.Used(), capacity)
	}
	// Just before the first batch expires, they are still remembered and still refused.
	edge := testNow.Add(authn.ChallengeTTL - time.Second)
	for _, c := range first {
		wantCode(t, ch.Consume(c, edge), proto.BadChallenge)
	}
	wantCode(t, ch.Consume(extra, edge), proto.BadChallenge)
	// At their expiry they are forgotten, and the refused challenge, not yet expired and
	// never consumed, goes through.
	expiry := testNow.Add(authn.ChallengeTTL)
	wantCode(t, ch.Consume(extra, expiry), "")
	if ch.Used() != 1 {
		t.Fatalf("Used() = %d after expiry, want 1", ch.Used())
	}
	for _, c := range first {
		wantCode(t, ch.Consume(c, expiry), proto.BadChallenge)
	}
}

// TestChallengeMemoryFlood: however many challenges are issued and consumed, the used-set
// never exceeds its cap.
func TestChallengeMemoryFlood(t *testing.T) {
	const capacity = 100
	ch := seededChallenger(t, capacity)
	now := testNow
	for i := range 5000 {
		now = now.Add(200 * time.Millisecond)
		c := issue(t, ch, now)
		_ = ch.Consume(c, now)
		if ch.Used() > capacity {
			t.Fatalf("after %d consumes Used() = %d > %d", i, ch.Used(), capacity)
		}
	}
}

// TestChallengeClockBack: stepping the clock back cannot revive a challenge whose entry has
// been forgotten.
func TestChallengeClockBack(t *testing.T) {
	ch := seededChallenger(t, 0)
	c := issue(t, ch, testNow)
	wantCode(t, ch.Consume(c, testNow), "")
	late := testNow.Add(authn.ChallengeTTL)
	wantCode(t, ch.Consume(issue(t, ch, late), late), "") // forgets c
	if ch.Used() != 1 {
		t.Fatalf("Used() = %d, want 1", ch.Used())
	}
	wantCode(t, ch.Consume(c, testNow.Add(time.Second)), proto.BadChallenge)
}

// TestChallengeFromTheFuture: a challenge whose expiry lies more than the TTL ahead of the
// clock was not issued by this clock, and is refused.
func TestChallengeFromTheFuture(t *testing.T) {
	ahead := authn.NewChallenger(challengeKey, seededRand(t), 0)
	here := authn.NewChallenger(challengeKey, seededRand(t), 0)
	c := issue(t, ahead, testNow.Add(time.Hour))
	wantCode(t, here.Consume(c, testNow), proto.BadChallenge)
	c = issue(t, ahead, testNow.Add(time.Hour))
	wantCode(t, here.Consume(c, testNow.Add(time.Hour)), "")
}

func TestChallengeIssueErrors(t *testing.T) {
	tests := []struct {
		name string
		ch   *authn.Challenger
		now  time.Time
	}{
		{"nil challenger", nil, testNow},
		{"zero challenger", &authn.Challenger{}, testNow},
		{"no random source", authn.NewChallenger([32]byte{}, nil, 0), testNow},
		{"failing random source", authn.NewChallenger([32]byte{}, iotest.ErrReader(errors.New("no entropy")), 0), testNow},
		{"short random source", authn.NewChallenger([32]byte{}, bytes.NewReader([]byte{1, 2, 3}), 0), testNow},
		{"before 1970", authn.NewChallenger([32]byte{}, seededRand(t), 0), time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC)},
		{"after 2106", authn.NewChallenger([32]byte{}, seededRand(t), 0), time.Date(2106, 2, 8, 0, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.ch.Issue(tt.now)
			wantCode(t, err, proto.Internal)
			if c != "" {
				t.Errorf("Issue returned %q with an error", c)
			}
		})
	}
	wantCode(t, (*authn.Challenger)(nil).Consume("x", testNow), proto.Internal)
	wantCode(t, (&authn.Challenger{}).Consume("x", testNow), proto.Internal)
	if (*authn.Challenger)(nil).Used() != 0 {
		t.Error("nil Used() != 0")
	}
}

func TestNewChallengeKey(t *testing.T) {
	a, err := authn.NewChallengeKey(seededRand(t))
	if err != nil || a == ([32]byte{}) {
		t.Fatalf("NewChallengeKey = %x, %v", a, err)
	}
	_, err = authn.NewChallengeKey(nil)
	wantCode(t, err, proto.Internal)
	_, err = authn.NewChallengeKey(bytes.NewReader(make([]byte, 31)))
	wantCode(t, err, proto.Internal)
}

// TestChallengeModel runs random sequences of issues, consumes and clock steps against a
// naive model: a challenge is accepted iff it was issued, is before its expiry, was not
// accepted before, and the set of accepted-unexpired challenges is below the cap.
func TestChallengeModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		capacity := rapid.IntRange(1, 6).Draw(rt, "cap")
		ch := authn.NewChallenger(challengeKey, bytes.NewReader(bytes.Repeat([]byte("0123456789abcdef"), 1<<10)), capacity)
		type issued struct {
			text string
			exp  time.Time
		}
		var all []issued
		accepted := map[string]time.Time{} // challenge → expiry
		now := testNow
		for i := range rapid.IntRange(1, 60).Draw(rt, "ops") {
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0:
				c, err := ch.Issue(now)
				if err != nil {
					rt.Fatal(err)
				}
				all = append(all, issued{c, now.Truncate(time.Second).Add(authn.ChallengeTTL)})
			case 1:
				now = now.Add(time.Duration(rapid.IntRange(0, 200).Draw(rt, "step")) * time.Second)
			case 2:
				if len(all) == 0 {
					continue
				}
				is := all[rapid.IntRange(0, len(all)-1).Draw(rt, "which")]
				live := 0
				for _, exp := range accepted {
					if now.Before(exp) {
						live++
					}
				}
				_, used := accepted[is.text]
				want := now.Before(is.exp) && !used && live < capacity
				err := ch.Consume(is.text, now)
				if (err == nil) != want {
					rt.Fatalf("op %d: Consume at +%s of a challenge expiring +%s (used %v, live %d/%d) = %v, model says ok=%v",
						i, now.Sub(testNow), is.exp.Sub(testNow), used, live, capacity, err, want)
				}
				if err != nil && proto.CodeOf(err) != proto.BadChallenge {
					rt.Fatalf("refusal with code %s", proto.CodeOf(err))
				}
				if err == nil {
					accepted[is.text] = is.exp
				}
				if ch.Used() > capacity {
					rt.Fatalf("Used() = %d > cap %d", ch.Used(), capacity)
				}
			case 3:
				wantCode(rt, ch.Consume(rapid.StringMatching(`[1-9A-Za-z]{0,40}`).Draw(rt, "junk"), now), proto.BadChallenge)
			}
		}
	})
}
