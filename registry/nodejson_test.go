package registry

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store"
)

// The hand-written encoder must produce exactly the bytes encoding/json produces for the same
// record, whatever the strings hold: quotes, backslashes, control characters, HTML
// characters, line separators, other non-ASCII and invalid UTF-8.
func TestAppendNodeJSONMatchesEncodingJSON(t *testing.T) {
	text := rapid.OneOf(
		rapid.String(),
		rapid.StringOf(rapid.RuneFrom([]rune{'"', '\\', '<', '>', '&', '\n', '\r', '\t', 0, 0x1f, 0x7f, '\u2028', '\u2029', 'é', '😀', 'a', ' '})),
		rapid.Map(rapid.SliceOf(rapid.Byte()), func(b []byte) string { return string(b) }),
	)
	rapid.Check(t, func(t *rapid.T) {
		var k didkey.PublicKey
		copy(k[:], rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, "key"))
		n := store.Node{
			Key:               k,
			DID:               text.Draw(t, "did"),
			Endpoint:          text.Draw(t, "endpoint"),
			Capabilities:      rapid.SliceOfN(text, 0, 4).Draw(t, "capabilities"),
			Region:            text.Draw(t, "region"),
			SignatureVerified: rapid.Bool().Draw(t, "verified"),
			FirstSeen:         time.Unix(rapid.Int64Range(-1e11, 1e12).Draw(t, "first"), 0),
			LastSeen:          time.Unix(rapid.Int64Range(-1e11, 1e12).Draw(t, "last"), 0),
		}
		if rapid.Bool().Draw(t, "signed") {
			sig := text.Draw(t, "signature")
			n.Signature = &sig
		}
		if rapid.Bool().Draw(t, "v2") {
			ts := rapid.Int64().Draw(t, "registration_ts")
			n.RegistrationTS = &ts
		}
		want, err := json.Marshal(nodeView(n))
		if err != nil {
			t.Fatal(err)
		}
		if got := appendNodeJSON(nil, n); !bytes.Equal(got, want) {
			t.Fatalf("appendNodeJSON:\n got %s\nwant %s", got, want)
		}
		if size := nodeJSONSize(n); size < len(want)/6 {
			t.Fatalf("size estimate %d is far below %d", size, len(want))
		}
	})
}
