package fuzz

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/store"
)

// registerV2Seeds are the message-10 cases of extensions.json, with the signing seed.
type registerV2Seed struct {
	prefix string
	seed   []byte
	m      canonical.RegisterV2
	sig    string
}

func registerV2Seeds(f *testing.F) []registerV2Seed {
	f.Helper()
	file := testkit.Extensions(f)
	var out []registerV2Seed
	for _, c := range file.Cases {
		if c.Message != 10 {
			continue
		}
		seed, err := hex.DecodeString(c.SeedHex)
		if err != nil {
			f.Fatal(err)
		}
		var m canonical.RegisterV2
		if err := json.Unmarshal(c.Fields, &m); err != nil {
			f.Fatalf("%s: %v", c.ID, err)
		}
		out = append(out, registerV2Seed{prefix: c.Prefix, seed: seed, m: m, sig: c.SignatureB58})
	}
	requireVectorSeeds(f, len(out))
	return out
}

// FuzzRegisterV2: message 10's bytes follow the protocol's rules like every other message's,
// with ts as the last line.
func FuzzRegisterV2(f *testing.F) {
	for _, s := range registerV2Seeds(f) {
		f.Add(s.prefix, s.m.DID, s.m.PublicKey, s.m.Endpoint, joinFuzzList(s.m.Capabilities), s.m.Region, s.m.TS)
	}
	f.Fuzz(func(t *testing.T, prefix, did, publicKey, endpoint, capabilities, region string, ts int64) {
		caps := splitFuzzList(capabilities)
		m := canonical.RegisterV2{DID: did, PublicKey: publicKey, Endpoint: endpoint, Capabilities: caps, Region: region, TS: ts}
		checkSignedMessage(t, prefix, canonical.RegisterV2Domain, m,
			strField("did", did), strField("public_key", publicKey), strField("endpoint", endpoint),
			listField("capabilities", caps), strField("region", region), intField("ts", ts))
	})
}

// FuzzRegisterV2Verify posts any body to POST /api/v1/register of a registry whose clock
// stands at the vectors' time, after a valid v2 registration of the vectors' node. Whatever
// the body: no panic, a known code, and the rules of docs/protocol.md §10.1 hold — an accepted v2
// registration verified over message 10 and is newer than the last one (or repeats it
// exactly), a refused one changed nothing, and posting the same body again changes nothing.
func FuzzRegisterV2Verify(f *testing.F) {
	seeds := registerV2Seeds(f)
	s := seeds[0]
	priv := ed25519.NewKeyFromSeed(s.seed)
	key, _ := didkey.KeyFromEd25519(priv.Public().(ed25519.PublicKey))
	body := func(m canonical.RegisterV2, sig *string, tsRaw string) []byte {
		r := map[string]any{"did": m.DID, "public_key": key.Hex(), "endpoint": m.Endpoint, "capabilities": m.Capabilities}
		if m.Region != "" {
			r["region"] = m.Region
		}
		if sig != nil {
			r["signature"] = *sig
		}
		raw, _ := json.Marshal(r)
		if tsRaw != "" {
			raw = append(raw[:len(raw)-1], []byte(`,"ts":`+tsRaw+`}`)...)
		}
		return raw
	}
	signAt := func(m canonical.RegisterV2, ts int64) (canonical.RegisterV2, string) {
		m.TS = ts
		m.PublicKey = key.Base58()
		sig, err := canonical.Sign(priv, canonical.DefaultPrefix, m)
		if err != nil {
			f.Fatal(err)
		}
		return m, sig
	}
	base, baseSig := signAt(s.m, s.m.TS)
	f.Add(body(base, &baseSig, "1736937000")) // the stored registration again
	newer, newerSig := signAt(s.m, s.m.TS+1)
	f.Add(body(newer, &newerSig, "1736937001")) // a newer one
	older, olderSig := signAt(s.m, s.m.TS-1)
	f.Add(body(older, &olderSig, "1736936999"))    // an older one
	f.Add(body(newer, &newerSig, "1736937002"))    // ts other than signed
	f.Add(body(newer, nil, "1736937001"))          // unsigned v2
	f.Add(body(newer, &newerSig, ""))              // a v2 signature sent as v1
	f.Add(body(newer, &newerSig, `"1736937001"`))  // ts a string
	f.Add(body(newer, &newerSig, "1.736937001e9")) // ts not an integer
	f.Add(body(newer, &newerSig, "null"))          // ts null: a v1 registration
	far, farSig := signAt(s.m, s.m.TS+301)
	f.Add(body(far, &farSig, "1736937301")) // outside the window
	long := string(bytes.Repeat([]byte("<"), 257))
	f.Add(body(newer, &long, "1736937001")) // signature over its cap

	f.Fuzz(func(t *testing.T, in []byte) {
		now := time.Unix(s.m.TS, 0).UTC()
		svc, err := registry.New(registry.Config{Store: store.NewMemory(), Clock: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		h := registry.NewHandler(svc)
		post := func(b []byte) (int, []byte) {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("POST", "/api/v1/register", bytes.NewReader(b)))
			return w.Code, w.Body.Bytes()
		}
		if code, out := post(body(base, &baseSig, "1736937000")); code != http.StatusOK {
			t.Fatalf("the vector registration: %d %s", code, out)
		}
		snapshot := func() []store.Node {
			nodes, err := svc.Nodes(context.Background(), api.NodeFilter{})
			if err != nil {
				t.Fatal(err)
			}
			return nodes
		}
		before := snapshot()
		code, out := post(in)
		after := snapshot()
		if code != http.StatusOK {
			var e api.ErrorBody
			if json.Unmarshal(out, &e) != nil || httpKnownCodes[e.Code] != code {
				t.Fatalf("status %d with body %s", code, out)
			}
			if !sameNodes(before, after) {
				t.Fatalf("a refused registration (%s) changed the table", e.Code)
			}
			return
		}
		var res api.RegisterResult
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("200 with body %s", out)
		}
		if ts := res.Data.RegistrationTS; ts != nil {
			k, err := didkey.DecodeKey(res.Data.PublicKey)
			if err != nil || res.Data.Signature == nil {
				t.Fatalf("a v2 record without a usable key or signature: %s", out)
			}
			region := ""
			if res.Data.Region != nil {
				region = *res.Data.Region
			}
			m := canonical.RegisterV2{DID: res.Data.DID, PublicKey: k.Base58(), Endpoint: res.Data.Endpoint, Capabilities: res.Data.Capabilities, Region: region, TS: *ts}
			if err := canonical.Verify(k, canonical.DefaultPrefix, m, *res.Data.Signature); err != nil {
				t.Fatalf("a v2 record that does not re-verify over message 10: %v", err)
			}
			if k == key && *ts < s.m.TS {
				t.Fatalf("registration_ts went back from %d to %d", s.m.TS, *ts)
			}
		}
		again, outAgain := post(in)
		if again != http.StatusOK || !sameNodes(after, snapshot()) {
			t.Fatalf("posting the same registration again: %d %s, or it changed the table", again, outAgain)
		}
	})
}

func sameNodes(a, b []store.Node) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
