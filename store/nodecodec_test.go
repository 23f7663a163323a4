package store

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// A node record survives its binary form exactly, zone offsets, nil lists and empty strings
// included.
func TestNodeCodecRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var n Node
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
		when := func(label string) time.Time {
			tm := time.Unix(rapid.Int64Range(-62135596800, 253402300799).Draw(t, label), rapid.Int64Range(0, 999999999).Draw(t, label+"ns"))
			if off := rapid.IntRange(-14, 14).Draw(t, label+"zone"); off != 0 {
				return tm.In(time.FixedZone("", off*3600))
			}
			return tm.UTC()
		}
		n.FirstSeen, n.LastSeen = when("first"), when("last")
		got, err := decodeNode(appendNode(nil, n))
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
	f.Add(appendNode(nil, Node{}))
	f.Add(appendNode(nil, testNode(testKey(1))))
	f.Add(appendNode(nil, Node{Capabilities: []string{"a", ""}, Signature: &sig, SignatureVerified: true}))
	f.Add([]byte{nodeCodecVersion})
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := decodeNode(b)
		if err != nil {
			return
		}
		if again := appendNode(nil, n); !bytes.Equal(again, b) {
			t.Fatalf("decoded %x, re-encoded %x", b, again)
		}
	})
}

func BenchmarkDecodeNode(b *testing.B) {
	raw := appendNode(nil, testNode(testKey(1)))
	b.ReportAllocs()
	for range b.N {
		if _, err := decodeNode(raw); err != nil {
			b.Fatal(err)
		}
	}
}
