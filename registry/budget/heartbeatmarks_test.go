package budget

import (
	"testing"
	"time"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/proto"
)

// TestHeartbeatAnswered: a key's mark settles, without a verification, exactly the heartbeats
// a verification could not make acceptable or could not change: an older ts, and within the
// ts window a repeat of the heartbeat that set the mark. Everything else is left to verify.
// A settled heartbeat is elsewhere when it comes from another address than the one the
// mark's heartbeat came from.
func TestHeartbeatAnswered(t *testing.T) {
	var h HeartbeatMarks
	key := didkey.PublicKey{1}
	now := time.Unix(1_736_937_000, 0)
	sent := ProofOf("did:svrp:n:0123abcd", "sig")
	const node, stranger = "192.0.2.7", "198.51.100.9"
	if fresh, _, err := h.Advance(key, now.Unix(), sent, now, node); !fresh || err != nil {
		t.Fatalf("first heartbeat: fresh %v, %v", fresh, err)
	}
	for _, tc := range []struct {
		name      string
		key       didkey.PublicKey
		ts        int64
		proof     HeartbeatProof
		fresh     bool // within the ts window
		from      string
		done      bool
		elsewhere bool
		code      proto.Code
	}{
		{"another key", didkey.PublicKey{2}, now.Unix() - 1, sent, true, stranger, false, false, ""},
		{"older ts, any signature", key, now.Unix() - 1, ProofOf("x", "y"), true, node, true, false, proto.StaleTS},
		{"older ts from another address", key, now.Unix() - 1, ProofOf("x", "y"), true, stranger, true, true, proto.StaleTS},
		{"the same heartbeat again", key, now.Unix(), sent, true, node, true, false, ""},
		{"the same heartbeat from another address", key, now.Unix(), sent, true, stranger, true, true, ""},
		{"the same ts, another signature", key, now.Unix(), ProofOf("did:svrp:n:0123abcd", "other"), true, stranger, false, false, ""},
		{"the same ts under another spelling", key, now.Unix(), ProofOf("did:svrp:0123", "sig"), true, stranger, false, false, ""},
		{"the same heartbeat, out of the window", key, now.Unix(), sent, false, stranger, false, false, ""},
		{"a newer ts", key, now.Unix() + 1, sent, true, stranger, false, false, ""},
	} {
		done, elsewhere, seen, err := h.Answered(tc.key, tc.ts, tc.proof, tc.fresh, tc.from)
		if done != tc.done || elsewhere != tc.elsewhere || (err == nil) != (tc.code == "") || (err != nil && proto.CodeOf(err) != tc.code) {
			t.Errorf("%s: done %v, elsewhere %v, %v; want done %v, elsewhere %v, code %q", tc.name, done, elsewhere, err, tc.done, tc.elsewhere, tc.code)
		}
		if tc.done && err == nil && !seen.Equal(now) {
			t.Errorf("%s: last_seen %v, want the one the heartbeat set, %v", tc.name, seen, now)
		}
	}
	// A newer heartbeat from another address moves the mark's sender with it.
	if fresh, _, err := h.Advance(key, now.Unix()+1, sent, now, stranger); !fresh || err != nil {
		t.Fatalf("newer heartbeat: fresh %v, %v", fresh, err)
	}
	if done, elsewhere, _, _ := h.Answered(key, now.Unix()+1, sent, true, node); !done || !elsewhere {
		t.Errorf("a repeat from the first address after the node moved: done %v, elsewhere %v; want both", done, elsewhere)
	}
}
