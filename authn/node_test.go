package authn_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
)

func TestNodeChecker(t *testing.T) {
	node := testkit.LabelKey(t, "node")
	key := pubKey(node)
	other := pubKey(testkit.LabelKey(t, "other"))
	did := func(f didkey.Form) string {
		d, err := didkey.NodeDID(key, f)
		if err != nil {
			t.Fatal(err)
		}
		return d.String()
	}
	short := did(didkey.FormShort)
	if strings.ToUpper(key.ShortBody()) == key.ShortBody() {
		t.Fatal("the test key's short body has no letter; pick another label")
	}
	opDID, _ := didkey.OperatorDID(key, didkey.FormShort)
	ts := testNow.Unix()
	sign := func(d string, ts int64) string {
		sig, err := canonical.Sign(node, prefix, canonical.Heartbeat{DID: d, TS: ts})
		if err != nil {
			t.Fatal(err)
		}
		return sig
	}
	tests := []struct {
		name string
		did  string
		key  didkey.PublicKey
		ts   int64
		now  time.Time
		msg  authn.NodeMessage
		sig  string
		want proto.Code
	}{
		{"short DID", short, key, ts, testNow, nil, "", ""},
		{"fallback DID", did(didkey.FormFallback), key, ts, testNow, nil, "", ""},
		{"full DID", did(didkey.FormFull), key, ts, testNow, nil, "", ""},
		{"untagged short DID", "did:svrp:" + key.ShortBody(), key, ts, testNow, nil, "", ""},
		{"h-tagged DID", "did:svrp:h:" + key.ShortBody(), key, ts, testNow, nil, "", ""},
		{"another method", "did:key:z6Mk", key, ts, testNow, nil, "", proto.IDBindingRequired},
		{"empty DID", "", key, ts, testNow, nil, "", proto.IDBindingRequired},
		{"uppercase method", strings.ToUpper(short), key, ts, testNow, nil, "", proto.IDBindingRequired},
		{"uppercase hex body", "did:svrp:n:" + strings.ToUpper(key.ShortBody()), key, ts, testNow, nil, "", proto.IDBindingFailed},
		{"bad grammar", "did:svrp:n:" + key.ShortBody()[:7], key, ts, testNow, nil, "", proto.IDBindingFailed},
		{"operator tag", opDID.String(), key, ts, testNow, nil, "", proto.IDBindingFailed},
		{"another key", short, other, ts, testNow, nil, "", proto.IDBindingFailed},
		{"ts 300 s behind", short, key, ts - 300, testNow, nil, "", ""},
		{"ts 300 s ahead", short, key, ts + 300, testNow, nil, "", ""},
		{"ts 301 s behind", short, key, ts - 301, testNow, nil, "", proto.StaleTS},
		{"ts 301 s ahead", short, key, ts + 301, testNow, nil, "", proto.StaleTS},
		{"now 300.9 s after ts (truncated)", short, key, ts, testNow.Add(300900 * time.Millisecond), nil, "", ""},
		{"ts max int64", short, key, math.MaxInt64, testNow, nil, "", proto.StaleTS},
		{"ts min int64", short, key, math.MinInt64, testNow, nil, "", proto.StaleTS},
		{"ts 0", short, key, 0, testNow, nil, "", proto.StaleTS},
		{"bad signature", short, key, ts, testNow, nil, sign(short, ts+1), proto.BadSignature},
		{"signature not base58", short, key, ts, testNow, nil, "0OIl", proto.BadSignature},
		{"empty signature", short, key, ts, testNow, nil, "-", proto.BadSignature},
		{"message given explicitly", short, key, ts, testNow, canonical.Heartbeat{DID: short, TS: ts}, "", ""},
		{"unrenderable message", short, key, ts, testNow, canonical.Cancel{BindingSessionID: "a\nb", NodeDID: short, TS: ts}, "x", proto.BadRequest},
		{"nil message", short, key, ts, testNow, nil, "nil", proto.Internal},
		// Order: identity, then freshness, then signature.
		{"wrong key and stale", short, other, ts - 1000, testNow, nil, "bad", proto.IDBindingFailed},
		{"stale and bad signature", short, key, ts - 1000, testNow, nil, "bad", proto.StaleTS},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, sig := tt.msg, tt.sig
			switch {
			case tt.sig == "nil":
				msg, sig = nil, ""
			case msg == nil:
				msg = canonical.Heartbeat{DID: tt.did, TS: tt.ts}
			}
			switch sig {
			case "":
				sig = sign(tt.did, tt.ts)
			case "-":
				sig = ""
			}
			c := authn.NodeChecker{Prefix: prefix, Clock: func() time.Time { return tt.now }}
			wantCode(t, c.Check(tt.key, msg, sig), tt.want)
			if tt.want != proto.IDBindingRequired && tt.want != proto.IDBindingFailed {
				// CheckBound makes every step after the identity binding, with the same answers.
				wantCode(t, c.CheckBound(tt.key, msg, sig), tt.want)
			}
		})
	}
	// CheckBound leaves the identity binding to its caller: it reads no DID.
	bound := authn.NodeChecker{Prefix: prefix, Clock: func() time.Time { return testNow }}
	wantCode(t, bound.CheckBound(key, canonical.Heartbeat{DID: opDID.String(), TS: ts}, sign(opDID.String(), ts)), "")
	// A signature under one prefix does not verify under another.
	c := authn.NodeChecker{Prefix: "libertynet", Clock: func() time.Time { return testNow }}
	wantCode(t, c.Check(key, canonical.Heartbeat{DID: short, TS: ts}, sign(short, ts)), proto.BadSignature)
	// The DID and ts checked are the ones the message carries, for every node message.
	for _, m := range []authn.NodeMessage{
		canonical.Heartbeat{DID: short, TS: ts - 301},
		canonical.Poll{NodeDID: short, TS: ts + 301},
		canonical.Cancel{BindingSessionID: "bs-1", NodeDID: short, TS: ts - 301},
		canonical.Unbind{BindingSessionID: "bs-1", NodeDID: short, TS: ts + 301},
	} {
		wantCode(t, c.Check(key, m, "x"), proto.StaleTS)
	}
	for _, m := range []authn.NodeMessage{
		canonical.Heartbeat{DID: opDID.String(), TS: ts},
		canonical.Poll{NodeDID: opDID.String(), TS: ts},
		canonical.Cancel{BindingSessionID: "bs-1", NodeDID: opDID.String(), TS: ts},
		canonical.Unbind{BindingSessionID: "bs-1", NodeDID: opDID.String(), TS: ts},
	} {
		wantCode(t, c.Check(key, m, "x"), proto.IDBindingFailed)
	}
	// A checker without a clock refuses: the package reads no clock of its own.
	noClock := authn.NodeChecker{Prefix: prefix}
	wantCode(t, noClock.Check(key, canonical.Heartbeat{DID: short, TS: ts}, sign(short, ts)), proto.Internal)
	if noClock.Fresh(ts) || !c.Fresh(ts+300) || c.Fresh(ts-301) {
		t.Error("Fresh does not follow the ts window of the checker's clock")
	}
}
