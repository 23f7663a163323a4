package registry

import (
	"testing"
	"time"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/proto"
)

// TestHeartbeatAnswered: a key's mark settles, without a verification, exactly the heartbeats
// a verification could not make acceptable or could not change: an older ts, and within the
// ts window a repeat of the heartbeat that set the mark. Everything else is left to verify.
func TestHeartbeatAnswered(t *testing.T) {
	var h heartbeatMarks
	key := didkey.PublicKey{1}
	now := time.Unix(1_736_937_000, 0)
	sent := proofOf("did:svrp:n:0123abcd", "sig")
	if fresh, _, err := h.advance(key, now.Unix(), sent, now); !fresh || err != nil {
		t.Fatalf("first heartbeat: fresh %v, %v", fresh, err)
	}
	for _, tc := range []struct {
		name  string
		key   didkey.PublicKey
		ts    int64
		proof heartbeatProof
		fresh bool // within the ts window
		done  bool
		code  proto.Code
	}{
		{"another key", didkey.PublicKey{2}, now.Unix() - 1, sent, true, false, ""},
		{"older ts, any signature", key, now.Unix() - 1, proofOf("x", "y"), true, true, proto.StaleTS},
		{"the same heartbeat again", key, now.Unix(), sent, true, true, ""},
		{"the same ts, another signature", key, now.Unix(), proofOf("did:svrp:n:0123abcd", "other"), true, false, ""},
		{"the same ts under another spelling", key, now.Unix(), proofOf("did:svrp:0123", "sig"), true, false, ""},
		{"the same heartbeat, out of the window", key, now.Unix(), sent, false, false, ""},
		{"a newer ts", key, now.Unix() + 1, sent, true, false, ""},
	} {
		done, seen, err := h.answered(tc.key, tc.ts, tc.proof, tc.fresh)
		if done != tc.done || (err == nil) != (tc.code == "") || (err != nil && proto.CodeOf(err) != tc.code) {
			t.Errorf("%s: done %v, %v; want done %v, code %q", tc.name, done, err, tc.done, tc.code)
		}
		if tc.done && err == nil && !seen.Equal(now) {
			t.Errorf("%s: last_seen %v, want the one the heartbeat set, %v", tc.name, seen, now)
		}
	}
}
