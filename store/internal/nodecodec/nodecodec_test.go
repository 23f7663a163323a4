package nodecodec

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/storetest"
)

// A node record survives its binary form exactly, zone offsets, nil lists and empty strings
// included.
func TestNodeCodecRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var n store.Node
		copy(n.Key[:], rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, "key"))
		n.DID = rapid.String().Draw(t, "did")
		n.Endpoint = rapid.String().Draw(t, "endpoint")
		n.Region = rapid.String().Draw(t, "region")
		if rapid.Bool().Draw(t, "caps") {
			n.Capabilities = rapid.SliceOfN(rapid.String(), 0, 5).Draw(t, "capabilities")
		}
		if rapid.Bool().Draw(t, "signed") {
			sig := rapid.String().Draw(t, "signature")
			n.Signature = &sig
		}
		n.SignatureVerified = rapid.Bool().Draw(t, "verified")
		if rapid.Bool().Draw(t, "block") {
			n.Origin = rapid.StringN(1, -1, -1).Draw(t, "address_block")
		}
		if rapid.Bool().Draw(t, "v2") {
			ts := rapid.Int64().Draw(t, "registration_ts")
			n.RegistrationTS = &ts
		}
		when := func(label string) time.Time {
			tm := time.Unix(rapid.Int64Range(-62135596800, 253402300799).Draw(t, label), rapid.Int64Range(0, 999999999).Draw(t, label+"ns"))
			if off := rapid.IntRange(-14, 14).Draw(t, label+"zone"); off != 0 {
				return tm.In(time.FixedZone("", off*3600))
			}
			return tm.UTC()
		}
		n.FirstSeen, n.LastSeen = when("first"), when("last")
		got, err := Decode(Append(nil, n))
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(n, got); d != "" {
			t.Fatalf("round trip (-want +got):\n%s", d)
		}
		if (n.Capabilities == nil) != (got.Capabilities == nil) {
			t.Fatalf("nil capabilities came back as %#v", got.Capabilities)
		}
		if _, off := got.LastSeen.Zone(); func() int { _, o := n.LastSeen.Zone(); return o }() != off {
			t.Fatalf("zone offset changed")
		}
	})
}

// FuzzDecodeNode: any bytes decode to a record that re-encodes to the same bytes, or to an
// error; never a panic.
func FuzzDecodeNode(f *testing.F) {
	sig := "sig"
	f.Add(Append(nil, store.Node{}))
	f.Add(Append(nil, storetest.Node(storetest.Key(1))))
	f.Add(Append(nil, store.Node{Capabilities: []string{"a", ""}, Signature: &sig, SignatureVerified: true}))
	f.Add([]byte{nodeCodecVersion})
	ts := int64(1736937000)
	f.Add(Append(nil, store.Node{Signature: &sig, SignatureVerified: true, RegistrationTS: &ts}))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := Decode(b)
		if err != nil {
			return
		}
		if again := Append(nil, n); !bytes.Equal(again, b) {
			t.Fatalf("decoded %x, re-encoded %x", b, again)
		}
	})
}

func BenchmarkDecodeNode(b *testing.B) {
	raw := Append(nil, storetest.Node(storetest.Key(1)))
	b.ReportAllocs()
	for range b.N {
		if _, err := Decode(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// A record written before version 2 existed reads back with a nil registration_ts, and a
// record without one is still written in version 1, byte for byte as before.
func TestNodeCodecVersion1(t *testing.T) {
	sig := "3L3pGNatsZWYpmy6SVyqeeb3E5DfLw4Xh6HQbBrLG1kYkqBGwqxcu2zUVjv7Tr3TBQvHyTf3AyY6AqFdq4ygcJm6"
	n := store.Node{Key: storetest.Key(7), DID: "did:svrp:n:1e452e22", Endpoint: "203.0.113.7:7000", Capabilities: []string{"inference"},
		Signature: &sig, SignatureVerified: true, FirstSeen: time.Unix(1736937000, 0).UTC(), LastSeen: time.Unix(1736937060, 0).UTC()}
	// The version 1 layout, written out by hand.
	v1 := []byte{1}
	v1 = append(v1, n.Key[:]...)
	v1 = append(v1, nodeFlagSigned|nodeFlagVerified|nodeFlagCaps)
	v1 = appendCodecTime(v1, n.FirstSeen)
	v1 = appendCodecTime(v1, n.LastSeen)
	for _, s := range []string{n.DID, n.Endpoint, "", sig} {
		v1 = appendCodecString(v1, s)
	}
	v1 = append(v1, 1)
	v1 = appendCodecString(v1, "inference")
	got, err := Decode(v1)
	if err != nil {
		t.Fatal(err)
	}
	if got.RegistrationTS != nil {
		t.Fatalf("a version 1 record read back with registration_ts %d", *got.RegistrationTS)
	}
	if d := cmp.Diff(n, got); d != "" {
		t.Fatalf("version 1 record (-want +got):\n%s", d)
	}
	if again := Append(nil, got); !bytes.Equal(again, v1) {
		t.Fatalf("a record without registration_ts is no longer written as version 1")
	}
	ts := int64(1736937000)
	n.RegistrationTS = &ts
	v2 := Append(nil, n)
	if v2[0] != 2 || !bytes.Equal(v2[1:len(v1)], v1[1:]) {
		t.Fatalf("version 2 is not version 1 plus the ts")
	}
	if got, err := Decode(v2); err != nil || got.RegistrationTS == nil || *got.RegistrationTS != ts {
		t.Fatalf("version 2 read back %v, %v", got.RegistrationTS, err)
	}
	// A version 1 record with a trailing ts, or a version 2 record without one, is malformed.
	if _, err := Decode(append(slices.Clone(v1), 2)); err == nil {
		t.Error("a version 1 record with trailing bytes decoded")
	}
	if _, err := Decode(append([]byte{2}, v1[1:]...)); err == nil {
		t.Error("a version 2 record without its ts decoded")
	}
}
