package registry_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mr-tron/base58"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/registry/api"
)

func TestHeartbeat(t *testing.T) {
	h := newHarness(t)
	n, stranger := newNode(t, "n"), newNode(t, "stranger")
	h.ok("POST", "/api/v1/register", n.registration(t, "203.0.113.7:7000"), "", nil)
	fallback, _ := didkey.NodeDID(n.key, didkey.FormFallback)
	otherTag := "did:svrp:h:" + n.key.ShortBody()

	withKey := func(r api.HeartbeatRequest, key string) api.HeartbeatRequest {
		r.PublicKey = &key
		return r
	}
	tests := []struct {
		name   string
		req    func(now time.Time) any
		status int
		code   string // "" for success
	}{
		// First, while no heartbeat is remembered: later ones may not go back (docs/protocol.md §10.3).
		{"ts 300 s behind", func(now time.Time) any { return n.heartbeat(t, n.did, now.Add(-300*time.Second)) }, 200, ""},
		{"short", func(now time.Time) any { return n.heartbeat(t, n.did, now) }, 200, ""},
		{"fallback", func(now time.Time) any { return n.heartbeat(t, fallback.String(), now) }, 200, ""},
		{"full", func(now time.Time) any { return n.heartbeat(t, n.fullDID(), now) }, 200, ""},
		{"short under another tag", func(now time.Time) any { return n.heartbeat(t, otherTag, now) }, 200, ""},
		{"with hex key", func(now time.Time) any { return withKey(n.heartbeat(t, n.did, now), n.key.Hex()) }, 200, ""},
		{"with base58 key", func(now time.Time) any { return withKey(n.heartbeat(t, n.fullDID(), now), n.key.Base58()) }, 200, ""},
		{"ts 301 s behind", func(now time.Time) any { return n.heartbeat(t, n.did, now.Add(-301*time.Second)) }, 401, "STALE_TS"},
		{"ts 301 s ahead", func(now time.Time) any { return n.heartbeat(t, n.did, now.Add(301*time.Second)) }, 401, "STALE_TS"},
		{"ts 0", func(now time.Time) any { return n.heartbeat(t, n.did, time.Unix(0, 0)) }, 401, "STALE_TS"},
		{"public_key of another node", func(now time.Time) any { return withKey(n.heartbeat(t, n.did, now), stranger.key.Hex()) }, 401, "ID_BINDING_FAILED"},
		{"public_key of 31 bytes", func(now time.Time) any {
			return withKey(n.heartbeat(t, n.did, now), base58.Encode(n.key[:31]))
		}, 401, "ID_BINDING_FAILED"},
		{"public_key not a key", func(now time.Time) any { return withKey(n.heartbeat(t, n.did, now), "0xnope") }, 401, "ID_BINDING_FAILED"},
		{"public_key sent empty", func(now time.Time) any { return withKey(n.heartbeat(t, n.did, now), "") }, 401, "ID_BINDING_FAILED"},
		{"never registered", func(now time.Time) any { return stranger.heartbeat(t, stranger.did, now) }, 404, "UNKNOWN_DID"},
		{"never registered, full DID", func(now time.Time) any { return stranger.heartbeat(t, stranger.fullDID(), now) }, 404, "UNKNOWN_DID"},
		{"never registered and stale", func(now time.Time) any { return stranger.heartbeat(t, stranger.did, now.Add(-time.Hour)) }, 404, "UNKNOWN_DID"},
		{"stale and badly signed", func(now time.Time) any {
			r := n.heartbeat(t, n.did, now.Add(-time.Hour))
			r.Signature = tamperSig(t, r.Signature)
			return r
		}, 401, "STALE_TS"},
		{"tampered signature", func(now time.Time) any {
			r := n.heartbeat(t, n.did, now)
			r.Signature = tamperSig(t, r.Signature)
			return r
		}, 401, "BAD_SIGNATURE"},
		{"signed by another key", func(now time.Time) any {
			r := n.heartbeat(t, n.did, now)
			r.Signature = stranger.heartbeat(t, n.did, now).Signature
			return r
		}, 401, "BAD_SIGNATURE"},
		{"signature over another ts", func(now time.Time) any {
			r := n.heartbeat(t, n.did, now)
			r.Signature = n.heartbeat(t, n.did, now.Add(time.Second)).Signature
			return r
		}, 401, "BAD_SIGNATURE"},
		{"signature over another spelling", func(now time.Time) any {
			r := n.heartbeat(t, n.fullDID(), now)
			r.Signature = n.heartbeat(t, n.did, now).Signature
			return r
		}, 401, "BAD_SIGNATURE"},
		{"signature not base58", func(now time.Time) any {
			r := n.heartbeat(t, n.did, now)
			r.Signature = "0OIl"
			return r
		}, 401, "BAD_SIGNATURE"},
		{"another method", func(now time.Time) any { return n.heartbeat(t, "did:key:z6Mk", now) }, 401, "ID_BINDING_REQUIRED"},
		{"not a DID", func(now time.Time) any { return n.heartbeat(t, n.key.Hex(), now) }, 401, "ID_BINDING_REQUIRED"},
		{"bad grammar", func(now time.Time) any { return n.heartbeat(t, strings.ToUpper(n.did[:10])+n.did[10:], now) }, 401, "ID_BINDING_REQUIRED"},
		{"uppercase body", func(now time.Time) any { return n.heartbeat(t, "did:svrp:n:"+strings.ToUpper(n.key.ShortBody()), now) }, 401, "ID_BINDING_FAILED"},
		{"9-hex body", func(now time.Time) any { return n.heartbeat(t, fallback.String()[:len(fallback.String())-1], now) }, 401, "ID_BINDING_FAILED"},
		{"operator tag", func(now time.Time) any { return n.heartbeat(t, "did:svrp:o:"+n.key.ShortBody(), now) }, 401, "ID_BINDING_FAILED"},
		// A control character breaks the DID grammar, which is checked first (see
		// parseNodeDID).
		{"DID with LF", func(now time.Time) any {
			return api.HeartbeatRequest{DID: n.did + "\n", TS: now.Unix(), Signature: signLines(n.priv, "service-node-heartbeat:v1", n.did+"\n", strconv.FormatInt(now.Unix(), 10))}
		}, 401, "ID_BINDING_FAILED"},
		{"missing ts", func(now time.Time) any {
			return map[string]any{"did": n.did, "signature": n.heartbeat(t, n.did, now).Signature}
		}, 400, "BAD_REQUEST"},
		{"missing signature", func(now time.Time) any { return map[string]any{"did": n.did, "ts": now.Unix()} }, 400, "BAD_REQUEST"},
		{"ts a fraction", func(now time.Time) any {
			return toTree(t, n.heartbeat(t, n.did, now)).withRaw(t, "1.5", "ts")
		}, 400, "BAD_REQUEST"},
		{"public_key a number", func(now time.Time) any {
			return toTree(t, n.heartbeat(t, n.did, now)).withRaw(t, "1", "public_key")
		}, 400, "BAD_REQUEST"},
		// Last, as the ts it leaves remembered is ahead of every row's: from here on any
		// heartbeat at now is older than the last, refused before its signature is looked at.
		{"ts 300 s ahead", func(now time.Time) any { return n.heartbeat(t, n.did, now.Add(300*time.Second)) }, 200, ""},
		{"older than the last, and badly signed", func(now time.Time) any {
			r := n.heartbeat(t, n.did, now)
			r.Signature = tamperSig(t, r.Signature)
			return r
		}, 401, "STALE_TS"},
	}
	for _, c := range rejectVectors(t, 4) {
		tests = append(tests, struct {
			name   string
			req    func(now time.Time) any
			status int
			code   string
		}{c.ID, func(now time.Time) any {
			return toTree(t, n.heartbeat(t, n.did, now)).withRaw(t, rejectValue(t, c), c.Field)
		}, c.Expected.HTTP, c.Expected.Code})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := h.in(t)
			h.clock.Advance(time.Second)
			before := h.listedNodes()[0].LastSeen
			// Listings may be cached for the rest of the second they were built in, so each
			// look after the heartbeat is taken a second later.
			if tt.code != "" {
				h.fails("POST", "/api/v1/heartbeat", tt.req(h.now()), "", tt.status, tt.code)
				h.clock.Advance(time.Second)
				if after := h.listedNodes()[0].LastSeen; after != before {
					t.Fatalf("a failed heartbeat moved last_seen from %s to %s", before, after)
				}
				return
			}
			var res api.HeartbeatResult
			h.ok("POST", "/api/v1/heartbeat", tt.req(h.now()), "", &res)
			at := stamp(h.now())
			h.clock.Advance(time.Second)
			if listed := h.listedNodes()[0].LastSeen; !res.OK || res.LastSeen != at || listed != at {
				t.Fatalf("heartbeat answered %+v; record last_seen %s; heartbeat at %s", res, listed, at)
			}
		})
	}
}
