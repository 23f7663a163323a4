package canonical_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/mr-tron/base58"
	"pgregory.net/rapid"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
)

// kind ties a protocol message number to its Go type and domain suffix. The field order is
// not restated here: it comes from the vectors' "messages" table.
type kind struct {
	num    int
	domain string
	zero   canonical.Message
}

var kinds = []kind{
	{1, canonical.LoginDomain, canonical.Login{}},
	{2, canonical.DeviceCredentialDomain, canonical.DeviceCredential{}},
	{3, canonical.RegisterDomain, canonical.Register{}},
	{4, canonical.HeartbeatDomain, canonical.Heartbeat{}},
	{5, canonical.PollDomain, canonical.Poll{}},
	{6, canonical.BindingSessionDomain, canonical.BindingSession{}},
	{7, canonical.AuthorizationDomain, canonical.Authorization{}},
	{8, canonical.AcceptanceDomain, canonical.Acceptance{}},
	{9, canonical.CancelDomain, canonical.Cancel{}},
}

func kindOf(t testing.TB, num int) kind {
	t.Helper()
	for _, k := range kinds {
		if k.num == num {
			return k
		}
	}
	t.Fatalf("no message %d", num)
	return kind{}
}

func (k kind) typ() reflect.Type { return reflect.TypeOf(k.zero) }

func loadCanon(t testing.TB) testkit.SignedFile {
	t.Helper()
	v := testkit.Canonical(t)
	if len(v.Messages) != len(kinds) {
		t.Fatalf("canonical.json: %d cases, %d messages", len(v.Cases), len(v.Messages))
	}
	return v
}

// decodeMessage turns a vector's field object into the message type, refusing unknown
// fields so that a JSON tag that drifts from the protocol's name cannot pass unnoticed.
func decodeMessage(t testing.TB, num int, raw json.RawMessage) canonical.Message {
	t.Helper()
	p := reflect.New(kindOf(t, num).typ())
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(p.Interface()); err != nil {
		t.Fatalf("message %d fields: %v", num, err)
	}
	// Messages 3 and 6 sign the node key in base58 whatever encoding the request used.
	switch m := p.Interface().(type) {
	case *canonical.Register:
		m.PublicKey = toBase58(t, m.PublicKey)
	case *canonical.BindingSession:
		m.NodePublicKey = toBase58(t, m.NodePublicKey)
	}
	return p.Elem().Interface().(canonical.Message)
}

func toBase58(t testing.TB, key string) string {
	t.Helper()
	k, err := didkey.DecodeKey(key)
	if err != nil {
		t.Fatalf("key %q: %v", key, err)
	}
	return k.Base58()
}

func pubOf(t testing.TB, priv ed25519.PrivateKey) didkey.PublicKey {
	t.Helper()
	k, err := didkey.KeyFromEd25519(priv.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// jsonName returns the protocol's name of a struct field, from its JSON tag.
func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

// fieldNames returns the protocol's names of a message struct's fields, in their order.
func fieldNames(typ reflect.Type) []string {
	var names []string
	for i := 0; i < typ.NumField(); i++ {
		names = append(names, jsonName(typ.Field(i)))
	}
	return names
}

// checkSignedCase reproduces one signed vector case with m, decoded from the case's fields,
// whose domain suffix is domain: the domain, the bytes (text and hex), the key from the seed,
// the signature Sign makes and Verify of the vector's. It returns the bytes and the key.
func checkSignedCase(t *testing.T, c testkit.SignedCase, domain string, m canonical.Message) ([]byte, didkey.PublicKey) {
	t.Helper()
	if c.Domain != c.Prefix+domain {
		t.Errorf("domain %q, want %q", c.Domain, c.Prefix+domain)
	}
	got, err := m.Bytes(c.Prefix)
	if err != nil {
		t.Fatalf("Bytes: %v", err)
	}
	if diff := cmp.Diff(c.ExpectedUTF8, string(got)); diff != "" {
		t.Errorf("bytes (-want +got):\n%s", diff)
	}
	if hex.EncodeToString(got) != c.ExpectedHex {
		t.Errorf("hex %x, want %s", got, c.ExpectedHex)
	}
	priv := testkit.SeedKey(c.SeedHex)
	pub := pubOf(t, priv)
	if pub.Hex() != c.PublicKeyHex || pub.Base58() != c.PublicKeyB58 {
		t.Fatalf("seed gives key %s, want %s", pub.Base58(), c.PublicKeyB58)
	}
	sig, err := canonical.Sign(priv, c.Prefix, m)
	if err != nil || sig != c.SignatureB58 {
		t.Errorf("Sign = %q, %v; want %q", sig, err, c.SignatureB58)
	}
	if err := canonical.Verify(pub, c.Prefix, m, c.SignatureB58); err != nil {
		t.Errorf("Verify(vector signature): %v", err)
	}
	// The vector's signature must also verify over the vector's bytes on their own, so a
	// wrong expectation in the file cannot hide behind a matching bug.
	raw, _ := base58.Decode(c.SignatureB58)
	if !ed25519.Verify(pub.Ed25519(), []byte(c.ExpectedUTF8), raw) {
		t.Errorf("vector signature does not verify over expected_utf8")
	}
	return got, pub
}

func TestVectorMessageTable(t *testing.T) {
	v := loadCanon(t)
	for _, k := range kinds {
		spec, ok := v.Messages[strconv.Itoa(k.num)]
		if !ok {
			t.Fatalf("message %d missing from the vectors", k.num)
		}
		if spec.DomainSuffix != k.domain {
			t.Errorf("message %d domain suffix %q, vectors say %q", k.num, k.domain, spec.DomainSuffix)
		}
		// The struct lists the fields in signing order, so its JSON names must be the
		// protocol's field list exactly.
		if diff := cmp.Diff(spec.Fields, fieldNames(k.typ())); diff != "" {
			t.Errorf("message %d (%s) fields (-vectors +struct):\n%s", k.num, k.typ().Name(), diff)
		}
	}
}

func TestVectorCanonical(t *testing.T) {
	v := loadCanon(t)
	byID := map[string]testkit.SignedCase{}
	for _, c := range v.Cases {
		byID[c.ID] = c
	}
	checked := 0
	for _, c := range v.Cases {
		t.Run(c.ID, func(t *testing.T) {
			k := kindOf(t, c.Message)
			m := decodeMessage(t, c.Message, c.Fields)
			got, pub := checkSignedCase(t, c, k.domain, m)
			if !bytes.HasPrefix(got, []byte(c.Domain+"\n")) {
				t.Errorf("bytes do not start with the domain line %q", c.Domain)
			}
			signer, ok := v.Signers[c.Signer]
			if !ok || signer.SeedHex != c.SeedHex {
				t.Fatalf("signer %q not in the signers table", c.Signer)
			}
			if want := v.Messages[strconv.Itoa(c.Message)].SignedBy; !strings.HasPrefix(c.Signer, want) {
				t.Errorf("signed by %q, message table says %q", c.Signer, want)
			}
			other := "other"
			if c.Prefix == other {
				other = "service"
			}
			if err := canonical.Verify(pub, other, m, c.SignatureB58); proto.CodeOf(err) != proto.BadSignature {
				t.Errorf("Verify under prefix %q = %v, want BAD_SIGNATURE", other, err)
			}
			wrong := pub
			wrong[5] ^= 0x40
			if err := canonical.Verify(wrong, c.Prefix, m, c.SignatureB58); proto.CodeOf(err) != proto.BadSignature {
				t.Errorf("Verify with another key = %v, want BAD_SIGNATURE", err)
			}

			if c.Message == 8 {
				ac, ok := byID[c.AuthorizationCase]
				if !ok || ac.Message != 7 {
					t.Fatalf("authorization_case %q is not a message 7 case", c.AuthorizationCase)
				}
				authz := decodeMessage(t, 7, ac.Fields).(canonical.Authorization)
				digest, err := authz.Digest(ac.Prefix)
				if err != nil {
					t.Fatal(err)
				}
				sum := sha256.Sum256([]byte(ac.ExpectedUTF8))
				if want := m.(canonical.Acceptance).AuthorizationDigest; digest != want || hex.EncodeToString(sum[:]) != want {
					t.Errorf("Digest = %s, sha256(expected) = %x, acceptance carries %s", digest, sum, want)
				}
			}
			checked++
		})
	}
	t.Logf("canonical.json: %d of %d cases reproduced byte for byte, signatures included", checked, len(v.Cases))
	if checked != len(v.Cases) {
		t.Errorf("only %d of %d cases passed", checked, len(v.Cases))
	}
}

// setLimit stores v in the *float64 field whose JSON name is name.
func setLimit(t testing.TB, m canonical.Message, name string, v float64) canonical.Message {
	t.Helper()
	p := reflect.New(reflect.TypeOf(m))
	p.Elem().Set(reflect.ValueOf(m))
	for i := 0; i < p.Elem().NumField(); i++ {
		if jsonName(p.Elem().Type().Field(i)) == name {
			p.Elem().Field(i).Set(reflect.ValueOf(&v))
			return p.Elem().Interface().(canonical.Message)
		}
	}
	t.Fatalf("no field %q", name)
	return nil
}

// TestVectorRejects covers the cases of rejects.json that this package decides: the
// injectivity, number and timestamp rules of docs/protocol.md §3. The other stages (JSON shape,
// field limits, login and credential checks) belong to the HTTP layer and are counted here
// only so that a new stage in the file cannot go untested silently.
func TestVectorRejects(t *testing.T) {
	v := testkit.Rejects(t)
	covered := map[string]int{}
	skipped := map[string]int{}
	for _, c := range v.Cases {
		if c.Stage != "canonical" {
			switch c.Stage {
			case "wellformed", "field_limits", "login_signature", "credential_validity":
				skipped[c.Stage]++
			default:
				t.Errorf("%s: unknown stage %q", c.ID, c.Stage)
			}
			continue
		}
		t.Run(c.ID, func(t *testing.T) {
			if c.Expected.Code != string(proto.BadRequest) {
				t.Fatalf("canonical-stage case expects %s", c.Expected.Code)
			}
			switch c.Category {
			case "timestamp", "calendar":
				var fields map[string]any
				if err := json.Unmarshal(c.Fields, &fields); err != nil {
					t.Fatal(err)
				}
				s, ok := fields[c.Field].(string)
				if !ok {
					t.Fatalf("field %s is not a string", c.Field)
				}
				if tm, err := canonical.ParseTime(s); proto.CodeOf(err) != proto.BadRequest || !tm.IsZero() {
					t.Errorf("ParseTime(%q) = %v, %v; want BAD_REQUEST", s, tm, err)
				}
			case "control_char", "list_item", "limit":
				var m canonical.Message
				if c.RawValue != "" {
					// NaN, Infinity and ±1e400 are not JSON: build the message from the base
					// fields and put the raw value's float64 (±Inf for an overflow) in place.
					f, err := strconv.ParseFloat(c.RawValue, 64)
					if err != nil && !errors.Is(err, strconv.ErrRange) {
						t.Fatalf("raw value %q: %v", c.RawValue, err)
					}
					m = setLimit(t, decodeMessage(t, c.Message, v.BaseFields[strconv.Itoa(c.Message)]), c.Field, f)
				} else {
					m = decodeMessage(t, c.Message, c.Fields)
				}
				b, err := m.Bytes(canonical.DefaultPrefix)
				if proto.CodeOf(err) != proto.BadRequest || !errors.Is(err, canonical.ErrBadRequest) || b != nil {
					t.Fatalf("Bytes = %q, %v; want BAD_REQUEST", b, err)
				}
				if !strings.Contains(err.Error(), c.Field) {
					t.Errorf("error %q does not name field %s", err, c.Field)
				}
				// The refusal comes before any signature check: even a signature that is not
				// base58 at all gets BAD_REQUEST, not BAD_SIGNATURE.
				if err := canonical.Verify(didkey.PublicKey{}, canonical.DefaultPrefix, m, "not a signature"); proto.CodeOf(err) != proto.BadRequest {
					t.Errorf("Verify = %v, want BAD_REQUEST", err)
				}
				priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
				if sig, err := canonical.Sign(priv, canonical.DefaultPrefix, m); proto.CodeOf(err) != proto.BadRequest || sig != "" {
					t.Errorf("Sign = %q, %v; want BAD_REQUEST", sig, err)
				}
				// The same message with the base field restored must be fine, so the refusal
				// is about this field and nothing else.
				if c.RawValue == "" {
					base := decodeMessage(t, c.Message, v.BaseFields[strconv.Itoa(c.Message)])
					if _, err := base.Bytes(canonical.DefaultPrefix); err != nil {
						t.Errorf("base fields refused: %v", err)
					}
				}
			default:
				t.Fatalf("unknown category %q", c.Category)
			}
			covered[c.Category]++
		})
	}
	total := 0
	for _, n := range covered {
		total += n
	}
	nskip := 0
	for _, n := range skipped {
		nskip += n
	}
	t.Logf("rejects.json: %d canonical-stage cases covered %v; %d left to the HTTP layer %v", total, covered, nskip, skipped)
	if total == 0 || total+nskip != len(v.Cases) {
		t.Errorf("covered %d + skipped %d != %d cases", total, nskip, len(v.Cases))
	}
}

func TestDomainLiterals(t *testing.T) {
	suffixes := make([]string, len(kinds))
	for i, k := range kinds {
		suffixes[i] = k.domain
		b, err := k.zero.Bytes("libertynet")
		if err != nil {
			t.Fatalf("message %d: %v", k.num, err)
		}
		if line, _, _ := strings.Cut(string(b), "\n"); line != "libertynet"+k.domain {
			t.Errorf("message %d domain line %q", k.num, line)
		}
	}
	// No suffix ends another, so no two (prefix, message) pairs share a domain line.
	for i, a := range suffixes {
		for j, b := range suffixes {
			if i != j && strings.HasSuffix(a, b) {
				t.Errorf("domain %q ends with %q", a, b)
			}
		}
	}
	if !strings.HasPrefix(mustBytes(t, canonical.Login{}, canonical.DefaultPrefix), "service-auth-challenge:v1\n") {
		t.Errorf("default prefix does not give the description's literal")
	}
}

func mustBytes(t testing.TB, m canonical.Message, prefix string) string {
	t.Helper()
	b, err := m.Bytes(prefix)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCheckPrefix(t *testing.T) {
	good := []string{"service", "libertynet", "a", "A.b_c-9", strings.Repeat("p", 64)}
	bad := []string{"", strings.Repeat("p", 65), "a b", "a\n", "a:b", "a/b", "é", "a\x00"}
	for _, p := range good {
		if err := canonical.CheckPrefix(p); err != nil {
			t.Errorf("CheckPrefix(%q): %v", p, err)
		}
	}
	for _, p := range bad {
		if err := canonical.CheckPrefix(p); proto.CodeOf(err) != proto.BadRequest {
			t.Errorf("CheckPrefix(%q) = %v, want BAD_REQUEST", p, err)
		}
		if b, err := (canonical.Heartbeat{DID: "d", TS: 1}).Bytes(p); err == nil || b != nil {
			t.Errorf("Bytes under prefix %q = %q, %v", p, b, err)
		}
	}
}

func TestCheckString(t *testing.T) {
	for c := 0; c < 0x80; c++ {
		s := "a" + string(rune(c)) + "b"
		err := canonical.CheckString("f", s)
		if bad := c < 0x20 || c == 0x7f; bad != (err != nil) {
			t.Errorf("CheckString(%q) = %v", s, err)
		}
		if err != nil && (proto.CodeOf(err) != proto.BadRequest || !strings.Contains(err.Error(), "f")) {
			t.Errorf("CheckString(%q) error %v", s, err)
		}
	}
	good := []string{"", "é", "日本", "🚀", "\u2028", "\u0085", "\u00a0", "\ufffd", ",", "a,b"}
	bad := []string{"\xff", "a\xc3", "\xed\xa0\x80", "\xc0\xaf"}
	for _, s := range good {
		if err := canonical.CheckString("f", s); err != nil {
			t.Errorf("CheckString(%q): %v", s, err)
		}
	}
	for _, s := range bad {
		if err := canonical.CheckString("f", s); proto.CodeOf(err) != proto.BadRequest {
			t.Errorf("CheckString(%q) = %v, want BAD_REQUEST", s, err)
		}
	}
}

func TestCheckList(t *testing.T) {
	tests := []struct {
		items []string
		ok    bool
	}{
		{nil, true},
		{[]string{}, true},
		{[]string{"a", "b"}, true},
		{[]string{"a", "a"}, true},
		{[]string{"é:x"}, true},
		{[]string{""}, false},
		{[]string{"a", ""}, false},
		{[]string{","}, false},
		{[]string{"a,b"}, false},
		{[]string{"a\n"}, false},
		{[]string{"\x7f"}, false},
		{[]string{"\xff"}, false},
	}
	for _, tt := range tests {
		err := canonical.CheckList("caps", tt.items)
		if (err == nil) != tt.ok || err != nil && (proto.CodeOf(err) != proto.BadRequest || !strings.Contains(err.Error(), "caps")) {
			t.Errorf("CheckList(%q) = %v, want ok=%v", tt.items, err, tt.ok)
		}
	}
}

func TestCheckNumber(t *testing.T) {
	tests := []struct {
		v  float64
		ok bool
	}{
		{0, true},
		{math.Copysign(0, -1), true},
		{math.SmallestNonzeroFloat64, true},
		{2.5, true},
		{canonical.MaxLimit, true},
		{canonical.MaxLimit + 1, false},
		{math.Nextafter(canonical.MaxLimit, math.Inf(1)), false},
		{1e16, false},
		{math.MaxFloat64, false},
		{-1, false},
		{-math.SmallestNonzeroFloat64, false},
		{math.Inf(1), false},
		{math.Inf(-1), false},
		{math.NaN(), false},
	}
	for _, tt := range tests {
		err := canonical.CheckNumber("limit", tt.v)
		if (err == nil) != tt.ok || err != nil && proto.CodeOf(err) != proto.BadRequest {
			t.Errorf("CheckNumber(%v) = %v, want ok=%v", tt.v, err, tt.ok)
		}
	}
}

func TestFormatNumber(t *testing.T) {
	tests := []struct {
		v    float64
		want string
	}{
		{0, "0"},
		{math.Copysign(0, -1), "0"},
		{10, "10"},
		{10.0, "10"},
		{2.5, "2.5"},
		{0.001, "0.001"},
		{0.00001, "0.00001"},
		{1e-7, "0.0000001"},
		{0.30000000000000004, "0.30000000000000004"},
		{1e15, "1000000000000000"},
		{1e21, "1000000000000000000000"},
		{canonical.MaxLimit, "9007199254740991"},
		{2251799813685248.5, "2251799813685248.5"},
		{math.SmallestNonzeroFloat64, "0." + strings.Repeat("0", 323) + "5"},
		{-2.5, "-2.5"},
	}
	for _, tt := range tests {
		if got := canonical.FormatNumber(tt.v); got != tt.want {
			t.Errorf("FormatNumber(%v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}

func TestLimitsRender(t *testing.T) {
	ten, zero, negZero := 10.0, 0.0, math.Copysign(0, -1)
	tests := []struct {
		single, daily *float64
		want          string
	}{
		{nil, nil, "\n\n"},
		{&ten, nil, "\n10\n"},
		{nil, &zero, "\n\n0"},
		{&negZero, &zero, "\n0\n0"},
	}
	for _, tt := range tests {
		m := canonical.Authorization{SingleLimit: tt.single, DailyLimit: tt.daily}
		got := mustBytes(t, m, "p")
		// Parts 5 and 6 are single_limit and daily_limit.
		parts := strings.Split(got, "\n")
		if mid := "\n" + parts[5] + "\n" + parts[6]; mid != tt.want {
			t.Errorf("limits %v/%v render %q, want %q", tt.single, tt.daily, mid, tt.want)
		}
	}
}

func TestAcceptedRendering(t *testing.T) {
	for accepted, want := range map[bool]string{true: "True", false: "False"} {
		parts := strings.Split(mustBytes(t, canonical.Acceptance{Accepted: accepted}, "p"), "\n")
		if parts[5] != want {
			t.Errorf("accepted=%v renders %q, want %q", accepted, parts[5], want)
		}
	}
}

func TestTSRendering(t *testing.T) {
	for _, ts := range []int64{0, 1, -1, 1736937000, math.MaxInt64, math.MinInt64} {
		want := strconv.FormatInt(ts, 10)
		for _, m := range []canonical.Message{canonical.Heartbeat{TS: ts}, canonical.Poll{TS: ts}, canonical.Cancel{TS: ts}} {
			b := mustBytes(t, m, "p")
			if got := b[strings.LastIndexByte(b, '\n')+1:]; got != want {
				t.Errorf("%T ts %d renders %q", m, ts, got)
			}
		}
	}
}

func TestListDoesNotReorderCaller(t *testing.T) {
	caps := []string{"b", "a"}
	got := mustBytes(t, canonical.Register{Capabilities: caps}, "p")
	if !strings.Contains(got, "\na,b\n") {
		t.Errorf("capabilities not sorted: %q", got)
	}
	if caps[0] != "b" {
		t.Errorf("Bytes sorted the caller's slice in place: %q", caps)
	}
}

func TestDecodeSignature(t *testing.T) {
	full := bytes.Repeat([]byte{0xff}, 64)
	tests := []struct {
		in string
		ok bool
	}{
		{base58.Encode(full), true},
		{base58.Encode(make([]byte, 64)), true},
		{"", false},
		{base58.Encode(full[:63]), false},
		{base58.Encode(append(full, 1)), false},
		{"0OIl", false},
		{base58.Encode(full) + " ", false},
		{strings.Repeat("z", 89), false},
		{strings.Repeat("1", 100000), false},
	}
	for _, tt := range tests {
		s, err := canonical.DecodeSignature(tt.in)
		if tt.ok != (err == nil) {
			t.Errorf("DecodeSignature(%.40q) = %v, want ok=%v", tt.in, err, tt.ok)
		}
		if err != nil && (proto.CodeOf(err) != proto.BadSignature || s != [64]byte{}) {
			t.Errorf("DecodeSignature(%.40q) = %x, %v; want BAD_SIGNATURE and no bytes", tt.in, s, err)
		}
	}
}

// scalarL is the order of the Ed25519 base point; S and S+L are the same scalar, so a
// verifier that accepted S+L would accept two encodings of one signature.
var scalarL, _ = new(big.Int).SetString("7237005577332262213973186563042994811857268227930398950396211612838007529729", 10)

func TestSignVerify(t *testing.T) {
	priv := testkit.TextKey("canonical test device")
	pub := pubOf(t, priv)
	m := canonical.Login{OperatorDID: "did:svrp:o:0efdccc6", DevicePublicKey: pub.Base58(), Challenge: "c", IssuedAt: "2025-01-15T10:30:00Z"}
	sig, err := canonical.Sign(priv, "service", m)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base58.Decode(sig)

	// Re-encode S as S+L: same scalar mod L, different bytes.
	le := slices.Clone(raw[32:])
	slices.Reverse(le)
	s := new(big.Int).SetBytes(le)
	s.Add(s, scalarL)
	sPlusL := s.FillBytes(make([]byte, 32))
	slices.Reverse(sPlusL)
	malleable := base58.Encode(append(slices.Clone(raw[:32]), sPlusL...))

	flipped := slices.Clone(raw)
	flipped[10] ^= 1

	tests := []struct {
		name   string
		pub    didkey.PublicKey
		prefix string
		msg    canonical.Message
		sig    string
		code   proto.Code
	}{
		{"valid", pub, "service", m, sig, ""},
		{"other prefix", pub, "libertynet", m, sig, proto.BadSignature},
		{"other challenge", pub, "service", canonical.Login{OperatorDID: m.OperatorDID, DevicePublicKey: m.DevicePublicKey, Challenge: "d", IssuedAt: m.IssuedAt}, sig, proto.BadSignature},
		{"other message type, same fields", pub, "service", canonical.Poll{NodeDID: m.OperatorDID}, sig, proto.BadSignature},
		{"flipped bit", pub, "service", m, base58.Encode(flipped), proto.BadSignature},
		{"non-canonical S", pub, "service", m, malleable, proto.BadSignature},
		{"other key", didkey.PublicKey{1}, "service", m, sig, proto.BadSignature},
		{"empty signature", pub, "service", m, "", proto.BadSignature},
		{"hex signature", pub, "service", m, hex.EncodeToString(raw), proto.BadSignature},
		{"bad field", pub, "service", canonical.Login{OperatorDID: "x\n"}, sig, proto.BadRequest},
		{"bad prefix", pub, "serv ice", m, sig, proto.BadRequest},
	}
	for _, tt := range tests {
		err := canonical.Verify(tt.pub, tt.prefix, tt.msg, tt.sig)
		if tt.code == "" {
			if err != nil {
				t.Errorf("%s: Verify: %v", tt.name, err)
			}
			continue
		}
		if got := proto.CodeOf(err); got != tt.code {
			t.Errorf("%s: Verify = %v, want %s", tt.name, err, tt.code)
		}
	}
	if bytes.Equal(sPlusL, raw[32:]) {
		t.Fatalf("S+L has the same encoding as S")
	}
	for _, n := range []int{0, 32, 63, 65} {
		if sig, err := canonical.Sign(make(ed25519.PrivateKey, n), "service", m); proto.CodeOf(err) != proto.BadRequest || sig != "" {
			t.Errorf("Sign with a %d-byte key = %q, %v; want BAD_REQUEST", n, sig, err)
		}
	}
}

func TestErrorsCarryCodes(t *testing.T) {
	for _, err := range []error{canonical.ErrBadRequest, canonical.ErrBadSignature} {
		if proto.CodeOf(err) == proto.Internal {
			t.Errorf("%v has no code", err)
		}
	}
	_, err := canonical.Register{Endpoint: "a\nb"}.Bytes("service")
	if !errors.Is(err, canonical.ErrBadRequest) || errors.Is(err, canonical.ErrBadSignature) {
		t.Errorf("errors.Is does not sort %v by code", err)
	}
}

// Generators for the properties. Field values come from small alphabets that hold the
// separators (LF, ',') and a few look-alikes, so that two different messages often come close
// to sharing bytes.
var (
	tightRunes = []rune{'a', 'b', ',', ':', ' ', 'é'}
	wideRunes  = []rune{'a', 'b', ',', ':', ' ', 'é', '\n', '\r', '\t', 0, 0x1f, 0x7f, 0x85, 0x2028, 0x1f600, 'T', '0', '.', '-'}
	prefixes   = []string{"service", "libertynet", "a", "a-b", "", "a b", "a\n"}
	// The first eight are valid limits, the rest are not.
	numbers = []float64{0, math.Copysign(0, -1), 1, 2.5, 10, 0.1, 1e-7, canonical.MaxLimit, canonical.MaxLimit + 1, -1, math.Inf(1), math.NaN()}
)

type gens struct {
	str     *rapid.Generator[string]
	list    *rapid.Generator[[]string]
	number  *rapid.Generator[*float64]
	integer *rapid.Generator[int64]
}

// anyGens draws any field value, refused ones included: control characters, invalid UTF-8,
// empty or comma-holding list items, and numbers outside the limits. Each field is broken
// only now and then, so that most messages have a single bad field or none, and a check
// that lets one kind of bad field through shows up.
func anyGens() gens {
	clean := rapid.StringOfN(rapid.RuneFrom([]rune{'a', 'b', ',', ':', ' ', 'é', 0x85, 0x2028, 0x1f600}), 0, 4, -1)
	cleanItem := rapid.StringOfN(rapid.RuneFrom([]rune{'a', 'b', ':', ' ', 'é', 0x2028}), 1, 3, -1)
	wide := rapid.OneOf(
		rapid.StringOfN(rapid.RuneFrom(wideRunes), 0, 4, -1),
		rapid.SampledFrom([]string{"\xff", "a\xc3", "\xed\xa0\x80", "", ",", "a,b", "\n"}),
	)
	return gens{
		str:     rarely(clean, wide),
		list:    listGen(rarely(cleanItem, wide)),
		number:  numberGen(rarely(rapid.OneOf(rapid.SampledFrom(numbers[:8]), rapid.Float64Range(0, canonical.MaxLimit)), rapid.SampledFrom(numbers[8:]))),
		integer: rapid.OneOf(rapid.SampledFrom([]int64{0, 1, -1, 10, 1736937000}), rapid.Int64()),
	}
}

// rarely draws from usual, and one time in eight from odd.
func rarely[V any](usual, odd *rapid.Generator[V]) *rapid.Generator[V] {
	return rapid.Custom(func(t *rapid.T) V {
		if rapid.IntRange(0, 7).Draw(t, "odd") == 0 {
			return odd.Draw(t, "value")
		}
		return usual.Draw(t, "value")
	})
}

// validGens draws only values that have bytes, from a tight domain where near-collisions are
// common.
func validGens() gens {
	item := rapid.StringOfN(rapid.RuneFrom(slices.DeleteFunc(slices.Clone(tightRunes), func(r rune) bool { return r == ',' })), 1, 2, -1)
	return gens{
		str:     rapid.StringOfN(rapid.RuneFrom(tightRunes), 0, 2, -1),
		list:    listGen(item),
		number:  numberGen(rapid.SampledFrom(numbers[:8])),
		integer: rapid.Int64Range(-2, 2),
	}
}

func listGen(item *rapid.Generator[string]) *rapid.Generator[[]string] {
	return rapid.Custom(func(t *rapid.T) []string {
		if rapid.Bool().Draw(t, "nil") {
			return nil
		}
		return rapid.SliceOfN(item, 0, 3).Draw(t, "items")
	})
}

func numberGen(v *rapid.Generator[float64]) *rapid.Generator[*float64] {
	return rapid.Custom(func(t *rapid.T) *float64 {
		if rapid.IntRange(0, 3).Draw(t, "kind") == 0 {
			return nil
		}
		n := v.Draw(t, "v")
		return &n
	})
}

func (g gens) message(t *rapid.T, k kind) canonical.Message {
	p := reflect.New(k.typ()).Elem()
	for i := 0; i < p.NumField(); i++ {
		f, name := p.Field(i), jsonName(p.Type().Field(i))
		switch f.Interface().(type) {
		case string:
			f.SetString(g.str.Draw(t, name))
		case []string:
			f.Set(reflect.ValueOf(g.list.Draw(t, name)))
		case *float64:
			f.Set(reflect.ValueOf(g.number.Draw(t, name)))
		case bool:
			f.SetBool(rapid.Bool().Draw(t, name))
		case int64:
			f.SetInt(g.integer.Draw(t, name))
		default:
			t.Fatalf("field %s has type %s", name, f.Type())
		}
	}
	return p.Interface().(canonical.Message)
}

// normalize maps a message to the value its bytes stand for: lists as sorted multisets
// (nil and empty alike) and -0 as 0.
func normalize(m canonical.Message) canonical.Message {
	p := reflect.New(reflect.TypeOf(m)).Elem()
	p.Set(reflect.ValueOf(m))
	for i := 0; i < p.NumField(); i++ {
		switch v := p.Field(i).Interface().(type) {
		case []string:
			s := append([]string{}, v...)
			slices.Sort(s)
			p.Field(i).Set(reflect.ValueOf(s))
		case *float64:
			if v != nil {
				n := *v + 0 // -0 + 0 == +0
				p.Field(i).Set(reflect.ValueOf(&n))
			}
		}
	}
	return p.Interface().(canonical.Message)
}

var prefixRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

func cleanString(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// valid is the protocol's rule for which messages have bytes, written independently of the
// package's checks.
func valid(prefix string, m canonical.Message) bool {
	if !prefixRE.MatchString(prefix) {
		return false
	}
	v := reflect.ValueOf(m)
	for i := 0; i < v.NumField(); i++ {
		switch x := v.Field(i).Interface().(type) {
		case string:
			if !cleanString(x) {
				return false
			}
		case []string:
			for _, it := range x {
				if it == "" || strings.Contains(it, ",") || !cleanString(it) {
					return false
				}
			}
		case *float64:
			if x != nil && !(*x >= 0 && *x <= canonical.MaxLimit) {
				return false
			}
		}
	}
	return true
}

// parseBytes is a left inverse of Bytes: it rebuilds the normalized message from its bytes,
// using only the protocol's rendering rules. Its existence is what makes Bytes injective.
func parseBytes(b []byte, prefix string, k kind) (canonical.Message, error) {
	parts := strings.Split(string(b), "\n")
	p := reflect.New(k.typ()).Elem()
	if len(parts) != 1+p.NumField() {
		return nil, fmt.Errorf("%d parts for %d fields", len(parts), p.NumField())
	}
	if parts[0] != prefix+k.domain {
		return nil, fmt.Errorf("domain line %q", parts[0])
	}
	for i := 0; i < p.NumField(); i++ {
		f, s := p.Field(i), parts[i+1]
		switch f.Interface().(type) {
		case string:
			f.SetString(s)
		case []string:
			items := []string{}
			if s != "" {
				items = strings.Split(s, ",")
			}
			if !slices.IsSorted(items) {
				return nil, fmt.Errorf("list %q not sorted", s)
			}
			f.Set(reflect.ValueOf(items))
		case *float64:
			if s == "" {
				continue
			}
			if strings.ContainsAny(s, "eE") || strings.HasSuffix(s, ".0") {
				return nil, fmt.Errorf("number %q is not in the protocol's form", s)
			}
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, err
			}
			f.Set(reflect.ValueOf(&v))
		case bool:
			switch s {
			case "True":
				f.SetBool(true)
			case "False":
			default:
				return nil, fmt.Errorf("boolean %q", s)
			}
		case int64:
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil || strconv.FormatInt(v, 10) != s {
				return nil, fmt.Errorf("integer %q", s)
			}
			f.SetInt(v)
		}
	}
	return p.Interface().(canonical.Message), nil
}

func TestPropBytesInvertible(t *testing.T) {
	g := anyGens()
	for _, k := range kinds {
		t.Run(k.typ().Name(), func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				prefix := rapid.SampledFrom(prefixes).Draw(t, "prefix")
				m := g.message(t, k)
				b, err := m.Bytes(prefix)
				if want := valid(prefix, m); want != (err == nil) {
					t.Fatalf("Bytes(%q, %#v) error %v; the protocol says valid=%v", prefix, m, err, want)
				}
				if err != nil {
					if proto.CodeOf(err) != proto.BadRequest || b != nil {
						t.Fatalf("refusal %q, %v; want BAD_REQUEST and no bytes", b, err)
					}
					return
				}
				back, err := parseBytes(b, prefix, k)
				if err != nil {
					t.Fatalf("bytes %q do not parse back: %v", b, err)
				}
				if diff := cmp.Diff(normalize(m), back); diff != "" {
					t.Fatalf("bytes %q parse back to another message (-want +got):\n%s", b, diff)
				}
			})
		})
	}
}

// perturb changes m only in ways the bytes must not see: list order, nil against empty,
// and the sign of a zero.
func perturb(t *rapid.T, m canonical.Message) canonical.Message {
	p := reflect.New(reflect.TypeOf(m)).Elem()
	p.Set(reflect.ValueOf(m))
	for i := 0; i < p.NumField(); i++ {
		switch v := p.Field(i).Interface().(type) {
		case []string:
			var s []string
			if len(v) > 0 || rapid.Bool().Draw(t, "empty") {
				s = rapid.Permutation(append([]string{}, v...)).Draw(t, "perm")
			}
			p.Field(i).Set(reflect.ValueOf(s))
		case *float64:
			if v != nil && *v == 0 {
				z := math.Copysign(0, -1)
				if math.Signbit(*v) {
					z = 0
				}
				p.Field(i).Set(reflect.ValueOf(&z))
			}
		}
	}
	return p.Interface().(canonical.Message)
}

func TestPropBytesInjective(t *testing.T) {
	g := validGens()
	for _, k := range kinds {
		t.Run(k.typ().Name(), func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				pa := rapid.SampledFrom(prefixes[:4]).Draw(t, "prefix a")
				a := g.message(t, k)
				pb, b := pa, perturb(t, a)
				if rapid.Bool().Draw(t, "independent") {
					pb = rapid.SampledFrom(prefixes[:4]).Draw(t, "prefix b")
					b = g.message(t, k)
				}
				ba, errA := a.Bytes(pa)
				bb, errB := b.Bytes(pb)
				if errA != nil || errB != nil {
					t.Fatalf("valid inputs refused: %v, %v", errA, errB)
				}
				same := pa == pb && reflect.DeepEqual(normalize(a), normalize(b))
				if bytes.Equal(ba, bb) != same {
					t.Fatalf("equal bytes %v but equal messages %v:\n%q %#v\n%q %#v", bytes.Equal(ba, bb), same, pa, a, pb, b)
				}
			})
		})
	}
}

func sigDigits(s string) string {
	s = strings.TrimPrefix(s, "-")
	if mant, _, ok := strings.Cut(s, "e"); ok {
		s = mant
	}
	s = strings.ReplaceAll(s, ".", "")
	s = strings.TrimLeft(s, "0")
	return strings.TrimRight(s, "0")
}

func TestPropFormatNumber(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := rapid.OneOf(
			rapid.Float64(),
			rapid.Float64Range(0, canonical.MaxLimit),
			rapid.Map(rapid.Int64Range(0, canonical.MaxLimit), func(i int64) float64 { return float64(i) }),
			rapid.SampledFrom(numbers[:9]),
		).Draw(t, "v")
		s := canonical.FormatNumber(v)
		back, err := strconv.ParseFloat(s, 64)
		if err != nil || back != v {
			t.Fatalf("FormatNumber(%v) = %q parses back to %v, %v", v, s, back, err)
		}
		if strings.ContainsAny(s, "eE+") || strings.HasSuffix(s, ".") || strings.Contains(s, ".") && strings.HasSuffix(s, "0") {
			t.Fatalf("FormatNumber(%v) = %q has an exponent or a trailing zero", v, s)
		}
		if v == 0 && s != "0" {
			t.Fatalf("FormatNumber(%v) = %q, want 0", v, s)
		}
		// Shortest: no more significant digits than Go's shortest round-trip form.
		if want := sigDigits(strconv.FormatFloat(v, 'e', -1, 64)); sigDigits(s) != want {
			t.Fatalf("FormatNumber(%v) = %q, significant digits %q, want %q", v, s, sigDigits(s), want)
		}
		if v == math.Trunc(v) && v >= 0 && v <= canonical.MaxLimit && s != strconv.FormatInt(int64(v), 10) {
			t.Fatalf("FormatNumber(%v) = %q, want the integer", v, s)
		}
	})
}

func benchCases(b *testing.B) map[int]testkit.SignedCase {
	v := loadCanon(b)
	basic := map[int]string{1: "login-basic", 2: "dc-basic", 3: "register-basic", 4: "heartbeat-basic", 5: "poll-basic", 6: "session-basic", 7: "authz-basic", 8: "accept-true", 9: "cancel-basic"}
	out := map[int]testkit.SignedCase{}
	for _, c := range v.Cases {
		if basic[c.Message] == c.ID {
			out[c.Message] = c
		}
	}
	if len(out) != len(kinds) {
		b.Fatalf("found %d of %d benchmark cases", len(out), len(kinds))
	}
	return out
}

func BenchmarkBytes(b *testing.B) {
	cases := benchCases(b)
	for _, k := range kinds {
		c := cases[k.num]
		m := decodeMessage(b, c.Message, c.Fields)
		b.Run(k.typ().Name(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Bytes(c.Prefix); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkVerify(b *testing.B) {
	for _, num := range []int{1, 6} {
		c := benchCases(b)[num]
		m := decodeMessage(b, c.Message, c.Fields)
		pub, err := didkey.DecodeKey(c.PublicKeyB58)
		if err != nil {
			b.Fatal(err)
		}
		msg := []byte(c.ExpectedUTF8)
		sig, _ := base58.Decode(c.SignatureB58)
		name := reflect.TypeOf(m).Name()
		b.Run(name+"/canonical", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := canonical.Verify(pub, c.Prefix, m, c.SignatureB58); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/raw-ed25519", func(b *testing.B) {
			b.ReportAllocs()
			edPub := pub.Ed25519()
			for b.Loop() {
				if !ed25519.Verify(edPub, msg, sig) {
					b.Fatal("no")
				}
			}
		})
	}
}
