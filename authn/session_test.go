package authn_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/mr-tron/base58"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/proto"
)

func TestNewToken(t *testing.T) {
	r := seededRand(t)
	seen := map[string]bool{}
	for range 100 {
		tok, hash, err := authn.NewToken(r)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := base58.Decode(tok)
		if err != nil || len(raw) != 32 {
			t.Fatalf("token %q is not base58 of 32 bytes", tok)
		}
		if hash != sha256.Sum256([]byte(tok)) || hash != authn.HashToken(tok) {
			t.Fatalf("hash of %q is not SHA-256 of its text", tok)
		}
		if seen[tok] {
			t.Fatalf("token %q drawn twice", tok)
		}
		seen[tok] = true
	}
	// The token is the random bytes, in base58.
	want := bytes.Repeat([]byte{0xab}, 32)
	tok, _, err := authn.NewToken(bytes.NewReader(want))
	if err != nil || tok != base58.Encode(want) {
		t.Fatalf("NewToken = %q, %v; want base58 of the reader's bytes", tok, err)
	}
}

func TestNewTokenErrors(t *testing.T) {
	for name, r := range map[string]interface{ Read([]byte) (int, error) }{
		"failing": iotest.ErrReader(errors.New("no entropy")),
		"short":   bytes.NewReader(make([]byte, 31)),
	} {
		t.Run(name, func(t *testing.T) {
			tok, hash, err := authn.NewToken(r)
			wantCode(t, err, proto.Internal)
			if tok != "" || hash != ([32]byte{}) {
				t.Errorf("partial result %q %x on error", tok, hash)
			}
		})
	}
	_, _, err := authn.NewToken(nil)
	wantCode(t, err, proto.Internal)
}

func TestHashToken(t *testing.T) {
	// SHA-256("abc"), FIPS 180-2 appendix B.1.
	const want = "\xba\x78\x16\xbf\x8f\x01\xcf\xea\x41\x41\x40\xde\x5d\xae\x22\x23\xb0\x03\x61\xa3\x96\x17\x7a\x9c\xb4\x10\xff\x61\xf2\x00\x15\xad"
	if h := authn.HashToken("abc"); string(h[:]) != want {
		t.Fatalf("HashToken(abc) = %x", h)
	}
}

func TestSessionExpiry(t *testing.T) {
	issued := testNow.Add(700 * time.Millisecond) // truncated to testNow
	s := authn.NewBearerSession("did:svrp:o:0efdccc6", issued)
	if !s.IssuedAt.Equal(testNow) || !s.ExpiresAt.Equal(testNow.Add(time.Hour)) {
		t.Fatalf("session %v – %v, want %v – %v", s.IssuedAt, s.ExpiresAt, testNow, testNow.Add(time.Hour))
	}
	if s.OperatorDID != "did:svrp:o:0efdccc6" {
		t.Fatalf("OperatorDID = %q", s.OperatorDID)
	}
	tests := []struct {
		name string
		now  time.Time
		want proto.Code
	}{
		{"at issue", testNow, ""},
		{"before issue (clock stepped back)", testNow.Add(-time.Minute), ""},
		{"3599 s", testNow.Add(3599 * time.Second), ""},
		{"3599.999 s", testNow.Add(3599*time.Second + 999*time.Millisecond), ""},
		{"exactly 3600 s", testNow.Add(3600 * time.Second), proto.SessionExpired},
		{"3601 s", testNow.Add(3601 * time.Second), proto.SessionExpired},
		{"a day", testNow.Add(24 * time.Hour), proto.SessionExpired},
		{"3600 s in another zone", testNow.Add(3600 * time.Second).In(time.FixedZone("X", 5*3600)), proto.SessionExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Check(tt.now)
			wantCode(t, err, tt.want)
			if tt.want != "" && !errors.Is(err, authn.ErrSessionExpired) {
				t.Errorf("%v does not match ErrSessionExpired", err)
			}
		})
	}
	wantCode(t, authn.BearerSession{}.Check(testNow), proto.NoSession)
}

// TestSessionOperator: a session yields its operator while, and only while, Check passes.
func TestSessionOperator(t *testing.T) {
	s := authn.NewBearerSession("did:svrp:o:0efdccc6", testNow)
	if op, err := s.Operator(testNow.Add(3599 * time.Second)); err != nil || op != (authn.Operator{DID: "did:svrp:o:0efdccc6"}) {
		t.Errorf("live session: %+v, %v", op, err)
	}
	op, err := s.Operator(testNow.Add(time.Hour))
	wantCode(t, err, proto.SessionExpired)
	if op != (authn.Operator{}) {
		t.Errorf("an expired session vouched for %+v", op)
	}
	op, err = authn.BearerSession{}.Operator(testNow)
	wantCode(t, err, proto.NoSession)
	if op != (authn.Operator{}) {
		t.Errorf("no session vouched for %+v", op)
	}
}

func TestParseBearer(t *testing.T) {
	const tok = "7KkAbNYjGBphqEP2XYYNDZP31jwdmQMeXzo1en9Xf9NL"
	tests := []struct {
		header string
		want   string // "" means NO_SESSION
	}{
		{"Bearer " + tok, tok},
		{"bearer " + tok, tok},
		{"BEARER " + tok, tok},
		{"BeArEr " + tok, tok},
		{"Bearer   " + tok, tok},
		{"Bearer\t" + tok, tok},
		{"  Bearer " + tok + "  ", tok},
		{"Bearer abc-._~+/def==", "abc-._~+/def=="},
		{"", ""},
		{"   ", ""},
		{"Bearer", ""},
		{"Bearer ", ""},
		{"Bearer    ", ""},
		{tok, ""},
		{"Basic dXNlcjpwYXNz", ""},
		{"Token " + tok, ""},
		{"Bearer" + tok, ""},
		{"Bearers " + tok, ""},
		{"Bearer: " + tok, ""},
		{"Bearer " + tok + " extra", ""},
		{"Bearer " + tok + ",", ""},
		{"Bearer a=b", ""},
		{"Bearer ==", ""},
		{"Bearer tok\x00en", ""},
		{"Bearer tök", ""},
		{"Bearer " + strings.Repeat("a", 257), ""},
		{"Bearer " + strings.Repeat("a", 256), strings.Repeat("a", 256)},
		{"Bearer\n" + tok, ""},
	}
	for _, tt := range tests {
		got, err := authn.ParseBearer(tt.header)
		if tt.want == "" {
			if err == nil {
				t.Errorf("ParseBearer(%q) = %q, want NO_SESSION", tt.header, got)
				continue
			}
			wantCode(t, err, proto.NoSession)
			if strings.Contains(err.Error(), tok) || (len(tt.header) > 8 && strings.Contains(err.Error(), tt.header[7:])) {
				t.Errorf("error %q repeats the header", err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseBearer(%q) = %q, %v; want %q", tt.header, got, err, tt.want)
		}
	}
}
