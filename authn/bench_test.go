package authn_test

import (
	"crypto/ed25519"
	"testing"

	"github.com/svrp/svrp/authn"
)

// BenchmarkVerifyLogin is the whole of device-login's checks, consuming a real challenge each
// time. The logins, each over its own challenge, are signed before the timer starts.
func BenchmarkVerifyLogin(b *testing.B) {
	w := newWorld(b)
	dc := w.credential()
	ch := seededChallenger(b, 1<<24)
	logins := make([]authn.Login, b.N)
	for i := range logins {
		logins[i] = w.signLogin(dc, issue(b, ch, testNow), loginIssuedAt)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := authn.VerifyLogin(logins[i], prefix, testNow, ch, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEd25519TwoVerifies is the floor under BenchmarkVerifyLogin: the two signature
// checks alone, over messages of the same lengths under the same keys.
func BenchmarkEd25519TwoVerifies(b *testing.B) {
	w := newWorld(b)
	dc := w.credential()
	ch := seededChallenger(b, 0)
	l := w.signLogin(dc, issue(b, ch, testNow), loginIssuedAt)
	m2, err := dc.Bytes(prefix)
	if err != nil {
		b.Fatal(err)
	}
	m1 := loginBytes(prefix, dc.DeviceCredential, l.Challenge, l.IssuedAt)
	rootPub, devPub := w.root.Public().(ed25519.PublicKey), w.device.Public().(ed25519.PublicKey)
	s2, s1 := ed25519.Sign(w.root, m2), ed25519.Sign(w.device, m1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if !ed25519.Verify(rootPub, m2, s2) || !ed25519.Verify(devPub, m1, s1) {
			b.Fatal("verify failed")
		}
	}
}

func BenchmarkChallengeIssueConsume(b *testing.B) {
	ch := seededChallenger(b, 1<<24)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		c, err := ch.Issue(testNow)
		if err != nil {
			b.Fatal(err)
		}
		if err := ch.Consume(c, testNow); err != nil {
			b.Fatal(err)
		}
	}
}
