package api

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzDecodeHeartbeat holds the plain heartbeat reader to the general decoder: whatever body
// it reads, the general decoder reads too, to the same request.
func FuzzDecodeHeartbeat(f *testing.F) {
	for _, s := range []string{
		`{"did":"did:svrp:abc","ts":1700000000,"signature":"5Hd"}`,
		`{"ts":-12,"signature":"","did":"x","public_key":null}`,
		` {"did":"a", "ts":0 ,"signature":"b","public_key":"k"}` + "\n",
		`{"did":"a","ts":01,"signature":"b"}`,
		`{"did":"a","ts":1.0,"signature":"b"}`,
		`{"did":"a","ts":1e3,"signature":"b"}`,
		`{"did":"a","ts":-0,"signature":"b"}`,
		`{"did":"a","ts":999999999999999999,"signature":"b"}`,
		`{"did":"a","ts":9999999999999999999,"signature":"b"}`,
		`{"did":"a","did":"b","ts":1,"signature":"c"}`,
		`{"did":"a\u0062","ts":1,"signature":"c"}`,
		`{"did":null,"ts":1,"signature":"c"}`,
		`{"did":"a","ts":"1","signature":"c"}`,
		`{"did":"a","ts":1,"signature":"c","extra":[1,{"x":null}]}`,
		`{"did":"a","ts":1,"signature":"c"}x`,
		`{"did":"a","ts":1,"signature":"c",}`,
		"\v{\"did\":\"a\",\"ts\":1,\"signature\":\"c\"}",
		`{"did":"é","ts":1,"signature":"c"}`,
		`[]`, ``, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		plain, ok := decodePlainHeartbeat(body)
		general, err := decodeHeartbeat(body)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("plain reader read %q, which the general decoder refuses: %v", body, err)
		}
		if diff := cmp.Diff(general, plain); diff != "" {
			t.Fatalf("%q read differently (-general +plain):\n%s", body, diff)
		}
	})
}

// The plain reader takes the bodies nodes send, so that the fuzz target compares something.
func TestPlainHeartbeatReadsNodeBodies(t *testing.T) {
	key := "k"
	for body, want := range map[string]HeartbeatRequest{
		`{"did":"did:svrp:abc","ts":1700000000,"signature":"5Hd"}`:                 {DID: "did:svrp:abc", TS: 1700000000, Signature: "5Hd"},
		`{ "signature" : "s", "ts" : -7, "did" : "d", "public_key" : "k" }` + "\n": {DID: "d", TS: -7, Signature: "s", PublicKey: &key},
		`{"did":"d","ts":0,"signature":"s","public_key":null}`:                     {DID: "d", Signature: "s"},
	} {
		got, ok := decodePlainHeartbeat([]byte(body))
		if !ok {
			t.Errorf("plain reader passed on %q", body)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", body, diff)
		}
	}
}
