package didkey_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
)

func keyFromSeed(t testing.TB, seedHex string) didkey.PublicKey {
	t.Helper()
	k, err := didkey.KeyFromEd25519(testkit.SeedKey(seedHex).Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustDecodeKey(t testing.TB, s string) didkey.PublicKey {
	t.Helper()
	k, err := didkey.DecodeKey(s)
	if err != nil {
		t.Fatalf("DecodeKey(%q): %v", s, err)
	}
	return k
}

// mustDID derives the DID of k in form f with derive: didkey.NodeDID or didkey.OperatorDID.
func mustDID(t testing.TB, derive func(didkey.PublicKey, didkey.Form) (didkey.DID, error), k didkey.PublicKey, f didkey.Form) didkey.DID {
	t.Helper()
	d, err := derive(k, f)
	if err != nil {
		t.Fatalf("DID of %s in form %s: %v", k.Hex(), f, err)
	}
	return d
}

func TestVectorKeys(t *testing.T) {
	v := testkit.DIDs(t)
	for _, c := range v.Keys {
		t.Run(c.Name, func(t *testing.T) {
			k := keyFromSeed(t, c.SeedHex)
			got := map[string]string{
				"public_key_hex":        k.Hex(),
				"public_key_b58":        k.Base58(),
				"string":                k.String(),
				"fingerprint":           k.Fingerprint(),
				"short_body":            k.ShortBody(),
				"did_short":             mustDID(t, didkey.NodeDID, k, didkey.FormShort).String(),
				"did_fallback":          mustDID(t, didkey.NodeDID, k, didkey.FormFallback).String(),
				"did_full":              mustDID(t, didkey.NodeDID, k, didkey.FormFull).String(),
				"did_operator_short":    mustDID(t, didkey.OperatorDID, k, didkey.FormShort).String(),
				"did_operator_fallback": mustDID(t, didkey.OperatorDID, k, didkey.FormFallback).String(),
			}
			want := map[string]string{
				"public_key_hex":        c.PublicKeyHex,
				"public_key_b58":        c.PublicKeyB58,
				"string":                c.PublicKeyHex,
				"fingerprint":           c.Fingerprint,
				"short_body":            c.SHA256OfKeyHex[:8],
				"did_short":             c.DIDShort,
				"did_fallback":          c.DIDFallback,
				"did_full":              c.DIDFull,
				"did_operator_short":    c.DIDOperatorShort,
				"did_operator_fallback": c.DIDOperatorFallback,
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("derived values (-want +got):\n%s", diff)
			}
			if sum := sha256.Sum256(k[:]); hex.EncodeToString(sum[:]) != c.SHA256OfKeyHex {
				t.Errorf("sha256 of key = %x, want %s", sum, c.SHA256OfKeyHex)
			}
			if h, b := mustDecodeKey(t, c.PublicKeyHex), mustDecodeKey(t, c.PublicKeyB58); h != k || b != k {
				t.Errorf("DecodeKey: hex gives %s, base58 gives %s, want %s", h, b, k)
			}
			if !k.Ed25519().Equal(ed25519.PublicKey(k[:])) {
				t.Errorf("Ed25519() = %x, want %x", k.Ed25519(), k[:])
			}
		})
	}
}

func TestVectorPositive(t *testing.T) {
	v := testkit.DIDs(t)
	for _, c := range v.Positive {
		t.Run(c.ID, func(t *testing.T) {
			if !c.IDBinding {
				t.Fatalf("positive case with id_binding false")
			}
			check, other := didkey.CheckNode, didkey.CheckOperator
			if c.Role == "operator" {
				check, other = didkey.CheckOperator, didkey.CheckNode
			}
			d, k, err := check(c.DID, c.PublicKey)
			if err != nil {
				t.Fatalf("check %s role: %v", c.Role, err)
			}
			got := []string{d.String(), d.Form().String(), d.Tag(), d.Body(), k.Hex(), k.Fingerprint()}
			want := []string{c.DID, c.Form, c.Tag, c.Body, c.PublicKeyHex, c.Fingerprint}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("did, form, tag, body, key, fingerprint (-want +got):\n%s", diff)
			}
			if !d.Matches(k) {
				t.Errorf("Matches = false after a successful check")
			}
			if d.IsOperator() != (c.Role == "operator") {
				t.Errorf("IsOperator = %v for role %s", d.IsOperator(), c.Role)
			}
			// A DID of one role must never pass as the other: an operator DID is not a
			// node identity and a node DID cannot log in as an operator.
			if _, _, err := other(c.DID, c.PublicKey); proto.CodeOf(err) != proto.IDBindingFailed {
				t.Errorf("the other role's check gives %v, want ID_BINDING_FAILED", err)
			}
			if c.KeyEncoding == "hex" && c.PublicKey != k.Hex() || c.KeyEncoding == "base58" && c.PublicKey != k.Base58() {
				t.Errorf("key %q does not re-encode to itself as %s", c.PublicKey, c.KeyEncoding)
			}
		})
	}
}

// TestVectorNegative checks every refused identity. Node cases carry the registry's own
// codes. Operator cases expect DC_ID_BINDING, which the login and binding layers give to any
// failure of CheckOperator; here the check itself must refuse, at the stage the vector names.
func TestVectorNegative(t *testing.T) {
	v := testkit.DIDs(t)
	for _, c := range v.Negative {
		t.Run(c.ID, func(t *testing.T) {
			d, parseErr := didkey.Parse(c.DID)
			if (parseErr == nil) != c.GrammarOK {
				t.Errorf("Parse error %v, vector says grammar_ok=%v", parseErr, c.GrammarOK)
			}
			_, keyErr := didkey.DecodeKey(c.PublicKey)
			switch c.Stage {
			case "grammar":
				if parseErr == nil {
					t.Errorf("Parse accepted an ungrammatical DID")
				}
			case "key":
				if keyErr == nil {
					t.Errorf("DecodeKey accepted %q", c.PublicKey)
				}
			case "id_binding":
				if parseErr != nil || keyErr != nil {
					t.Fatalf("parse %v, key %v; want both to pass", parseErr, keyErr)
				}
				if d.Matches(mustDecodeKey(t, c.PublicKey)) {
					t.Errorf("Matches = true for a key the DID does not derive from")
				}
			case "role":
				if parseErr != nil {
					t.Fatalf("Parse: %v", parseErr)
				}
			default:
				t.Fatalf("unknown stage %q", c.Stage)
			}

			var err error
			var dd didkey.DID
			var kk didkey.PublicKey
			switch c.Role {
			case "node":
				dd, kk, err = didkey.CheckNode(c.DID, c.PublicKey)
				if got := proto.CodeOf(err); string(got) != c.Expected.Code {
					t.Errorf("CheckNode code %s (%v), want %s", got, err, c.Expected.Code)
				}
			case "operator":
				if c.Expected.Code != string(proto.DCIDBinding) {
					t.Fatalf("operator case expects %s", c.Expected.Code)
				}
				dd, kk, err = didkey.CheckOperator(c.DID, c.PublicKey)
				if got := proto.CodeOf(err); got != proto.IDBindingFailed && got != proto.IDBindingRequired {
					t.Errorf("CheckOperator code %s (%v), want an id-binding code", got, err)
				}
			default:
				t.Fatalf("unknown role %q", c.Role)
			}
			if !errors.Is(err, didkey.ErrBindingFailed) && !errors.Is(err, didkey.ErrBindingRequired) {
				t.Errorf("error %v matches neither sentinel", err)
			}
			if !dd.IsZero() || kk != (didkey.PublicKey{}) {
				t.Errorf("partial result on error: %q, %s", dd, kk)
			}
		})
	}
}

func TestVectorCollision(t *testing.T) {
	c := testkit.DIDs(t).Collision
	first, second := keyFromSeed(t, c.First.SeedHex), keyFromSeed(t, c.Second.SeedHex)
	if first.Base58() != c.First.PublicKeyB58 || second.Base58() != c.Second.PublicKeyB58 {
		t.Fatalf("seeds give %s and %s, want %s and %s", first.Base58(), second.Base58(), c.First.PublicKeyB58, c.Second.PublicKeyB58)
	}
	if first.ShortBody() != c.ShortBody || second.ShortBody() != c.ShortBody {
		t.Fatalf("short bodies %s and %s, want both %s", first.ShortBody(), second.ShortBody(), c.ShortBody)
	}
	short := mustDID(t, didkey.NodeDID, first, didkey.FormShort)
	if short.String() != c.First.DIDShort || mustDID(t, didkey.NodeDID, second, didkey.FormShort).String() != c.Second.DIDShort {
		t.Errorf("short DIDs differ from the vector")
	}
	if !short.Matches(first) || !short.Matches(second) {
		t.Errorf("the shared short DID must bind to both keys")
	}
	f1, f2 := mustDID(t, didkey.NodeDID, first, didkey.FormFallback), mustDID(t, didkey.NodeDID, second, didkey.FormFallback)
	if f1.String() != c.First.DIDFallback || f2.String() != c.Second.DIDFallback {
		t.Errorf("fallback DIDs %s, %s; want %s, %s", f1, f2, c.First.DIDFallback, c.Second.DIDFallback)
	}
	if f1.Matches(second) || f2.Matches(first) {
		t.Errorf("a fallback DID binds to the other key")
	}
	if didkey.SameIdentity(short, f1, second) || !didkey.SameIdentity(short, f1, first) {
		t.Errorf("SameIdentity does not tell the two keys apart")
	}
}

func TestParse(t *testing.T) {
	const (
		full = "did:svrp:d6deebf3c5b083974d182076a4fba86e9e158c691080fc114f862e3c063f471f"
		req  = proto.IDBindingRequired
		fail = proto.IDBindingFailed
	)
	tests := []struct {
		in   string
		form didkey.Form
		tag  string
		code proto.Code // "" when the DID parses
	}{
		{"did:svrp:n:024f53bf", didkey.FormShort, "n", ""},
		{"did:svrp:024f53bf", didkey.FormShort, "", ""},
		{"did:svrp:0:024f53bf", didkey.FormShort, "0", ""},
		{"did:svrp:z:024f53bfd7", didkey.FormFallback, "z", ""},
		{"did:svrp:o:024f53bfd7", didkey.FormFallback, "o", ""},
		{"did:svrp:024f53bfd7", didkey.FormFallback, "", ""},
		{full, didkey.FormFull, "", ""},
		{"did:svrp:n:" + full[len("did:svrp:"):], 0, "", fail},
		{"", 0, "", req},
		{"did:svrp", 0, "", req},
		{"did:svr:n:024f53bf", 0, "", req},
		{"DID:SVRP:n:024f53bf", 0, "", req},
		{"did:svrp:", 0, "", fail},
		{"did:svrp:n", 0, "", fail},
		{"did:svrp:n:", 0, "", fail},
		{"did:svrp::024f53bf", 0, "", fail},
		{"did:svrp:A:024f53bf", 0, "", fail},
		{"did:svrp:é:024f53bf", 0, "", fail},
		{"did:svrp:n:024f53bf:", 0, "", fail},
		{"did:svrp:n:n:024f53bf", 0, "", fail},
		{"did:svrp:n:024f53bF", 0, "", fail},
		{"did:svrp:n:024f53b", 0, "", fail},
		{"did:svrp:n:024f53bfd", 0, "", fail},
		{"did:svrp:n:024f53bf\n", 0, "", fail},
		{"did:svrp:n:024f53bf\x00", 0, "", fail},
		{"did:svrp:n:０24f53bf", 0, "", fail},
		{full + "0", 0, "", fail},
		{full[:len(full)-1], 0, "", fail},
	}
	for _, tt := range tests {
		d, err := didkey.Parse(tt.in)
		if tt.code != "" {
			if got := proto.CodeOf(err); got != tt.code {
				t.Errorf("Parse(%q) code %s (%v), want %s", tt.in, got, err, tt.code)
			}
			if !d.IsZero() {
				t.Errorf("Parse(%q) returned %q with an error", tt.in, d)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if d.String() != tt.in || d.Form() != tt.form || d.Tag() != tt.tag || d.IsZero() {
			t.Errorf("Parse(%q) = %q form %s tag %q, want form %s tag %q", tt.in, d, d.Form(), d.Tag(), tt.form, tt.tag)
		}
		if want := tt.in[strings.LastIndexByte(tt.in, ':')+1:]; d.Body() != want {
			t.Errorf("Parse(%q).Body() = %q, want %q", tt.in, d.Body(), want)
		}
		if d.IsOperator() != (tt.tag == "o") {
			t.Errorf("Parse(%q).IsOperator() = %v", tt.in, d.IsOperator())
		}
	}
}

func TestErrorTextQuotesInput(t *testing.T) {
	_, err := didkey.Parse("did:web:\x00evil")
	if err == nil || !strings.Contains(err.Error(), `"did:web:\x00evil"`) {
		t.Errorf("error %q does not quote the input", err)
	}
	long := "did:svrp:" + strings.Repeat("a", 500)
	_, err = didkey.Parse(long)
	if err == nil || len(err.Error()) > 200 {
		t.Errorf("error text for a 509-byte DID is %d bytes, want it cut", len(err.Error()))
	}
}

func TestDecodeKey(t *testing.T) {
	zeroHex := strings.Repeat("0", 64)
	tests := []struct {
		in   string
		want string // hex of the key; "" when the input must be refused
	}{
		{"d6deebf3c5b083974d182076a4fba86e9e158c691080fc114f862e3c063f471f", "d6deebf3c5b083974d182076a4fba86e9e158c691080fc114f862e3c063f471f"},
		{"FTmQDvKxAi2H8zuj5A2EiWoypxRCYvupQNirSboqhGJi", "d6deebf3c5b083974d182076a4fba86e9e158c691080fc114f862e3c063f471f"},
		{zeroHex, zeroHex},
		// 32 leading '1's are 32 zero bytes: base58's smallest 32-byte value.
		{strings.Repeat("1", 32), zeroHex},
		{strings.Repeat("1", 31), ""},
		{strings.Repeat("1", 33), ""},
		// The longest base58 of 32 bytes (all 0xff) is 44 characters.
		{"JEKNVnkbo3jma5nREBBJCDoXFVeKkD56V3xKrvRmWxFG", strings.Repeat("f", 64)},
		{"JEKNVnkbo3jma5nREBBJCDoXFVeKkD56V3xKrvRmWxFGx", ""},
		{strings.Repeat("z", 45), ""},
		{strings.Repeat("z", 10000), ""},
		{"", ""},
		{"D6DEEBF3C5B083974D182076A4FBA86E9E158C691080FC114F862E3C063F471F", ""},
		{"0xd6deebf3c5b083974d182076a4fba86e9e158c691080fc114f862e3c063f471f", ""},
		{"d6deebf3c5b083974d182076a4fba86e9e158c691080fc114f862e3c063f471", ""},
		{" FTmQDvKxAi2H8zuj5A2EiWoypxRCYvupQNirSboqhGJi", ""},
		{"FTmQDvKxAi2H8zuj5A2EiWoypxRCYvupQNirSboqhGJi\n", ""},
		{"FTmQDvKxAi2H8zuj5A2EiWoypxRCYvupQNirSboqhGJ\xff", ""},
	}
	for _, tt := range tests {
		k, err := didkey.DecodeKey(tt.in)
		if tt.want == "" {
			if proto.CodeOf(err) != proto.IDBindingFailed || !errors.Is(err, didkey.ErrBindingFailed) {
				t.Errorf("DecodeKey(%.50q) error %v, want ID_BINDING_FAILED", tt.in, err)
			}
			if k != (didkey.PublicKey{}) {
				t.Errorf("DecodeKey(%.50q) returned %s with an error", tt.in, k)
			}
			continue
		}
		if err != nil || k.Hex() != tt.want {
			t.Errorf("DecodeKey(%.50q) = %s, %v; want %s", tt.in, k, err, tt.want)
		}
	}
}

func TestKeyFromEd25519(t *testing.T) {
	for _, n := range []int{0, 31, 33, 64} {
		if _, err := didkey.KeyFromEd25519(make(ed25519.PublicKey, n)); proto.CodeOf(err) != proto.IDBindingFailed {
			t.Errorf("KeyFromEd25519 of %d bytes: %v, want ID_BINDING_FAILED", n, err)
		}
	}
	k := mustDecodeKey(t, "FTmQDvKxAi2H8zuj5A2EiWoypxRCYvupQNirSboqhGJi")
	pub := k.Ed25519()
	pub[0] ^= 1
	if k.Ed25519()[0] == pub[0] {
		t.Errorf("Ed25519() shares memory with the key")
	}
}

func TestForm(t *testing.T) {
	got := []string{didkey.FormInvalid.String(), didkey.FormShort.String(), didkey.FormFallback.String(), didkey.FormFull.String(), didkey.Form(9).String()}
	want := []string{"Form?0", "short", "fallback", "full", "Form?9"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Form strings (-want +got):\n%s", diff)
	}
	// Callers may store a Form, so its values must never move.
	if didkey.FormInvalid != 0 || didkey.FormShort != 1 || didkey.FormFallback != 2 || didkey.FormFull != 3 {
		t.Errorf("Form values moved")
	}
}

func TestDeriveRefusesOtherForms(t *testing.T) {
	var k didkey.PublicKey
	for _, f := range []didkey.Form{didkey.FormInvalid, didkey.Form(7)} {
		if d, err := didkey.NodeDID(k, f); proto.CodeOf(err) != proto.IDBindingFailed || !d.IsZero() {
			t.Errorf("NodeDID(%s) = %q, %v; want ID_BINDING_FAILED", f, d, err)
		}
	}
	for _, f := range []didkey.Form{didkey.FormInvalid, didkey.FormFull, didkey.Form(7)} {
		if d, err := didkey.OperatorDID(k, f); proto.CodeOf(err) != proto.IDBindingFailed || !d.IsZero() {
			t.Errorf("OperatorDID(%s) = %q, %v; want ID_BINDING_FAILED", f, d, err)
		}
	}
}

func TestZeroDID(t *testing.T) {
	var d didkey.DID
	var k didkey.PublicKey
	if !d.IsZero() || d.String() != "" || d.Body() != "" || d.Tag() != "" || d.IsOperator() || d.Matches(k) {
		t.Errorf("zero DID is not inert: %q %q %q %v %v", d, d.Body(), d.Tag(), d.IsOperator(), d.Matches(k))
	}
	if _, ok := d.Key(); ok {
		t.Errorf("zero DID yields a key")
	}
}

func TestKey(t *testing.T) {
	k := mustDecodeKey(t, "FTmQDvKxAi2H8zuj5A2EiWoypxRCYvupQNirSboqhGJi")
	got, ok := mustDID(t, didkey.NodeDID, k, didkey.FormFull).Key()
	if !ok || got != k {
		t.Errorf("full DID Key() = %s, %v; want %s", got, ok, k)
	}
	for _, f := range []didkey.Form{didkey.FormShort, didkey.FormFallback} {
		if _, ok := mustDID(t, didkey.NodeDID, k, f).Key(); ok {
			t.Errorf("%s DID yields a key", f)
		}
	}
}

func TestText(t *testing.T) {
	type record struct {
		DID didkey.DID `json:"did"`
	}
	in := `{"did":"did:svrp:n:024f53bf"}`
	var r record
	if err := json.Unmarshal([]byte(in), &r); err != nil {
		t.Fatal(err)
	}
	if r.DID.Form() != didkey.FormShort || r.DID.Tag() != "n" {
		t.Errorf("unmarshalled %q form %s tag %q", r.DID, r.DID.Form(), r.DID.Tag())
	}
	out, err := json.Marshal(r)
	if err != nil || string(out) != in {
		t.Errorf("Marshal = %s, %v; want %s", out, err, in)
	}
	for _, bad := range []string{`{"did":"did:web:x"}`, `{"did":"did:svrp:n:024F53BF"}`} {
		r := record{DID: mustDID(t, didkey.NodeDID, didkey.PublicKey{}, didkey.FormShort)}
		before := r.DID
		err := json.Unmarshal([]byte(bad), &r)
		if c := proto.CodeOf(err); c != proto.IDBindingRequired && c != proto.IDBindingFailed {
			t.Errorf("Unmarshal(%s) = %v, want an id-binding error", bad, err)
		}
		if r.DID != before {
			t.Errorf("Unmarshal(%s) overwrote the DID on error", bad)
		}
	}
}

func TestCheckOrder(t *testing.T) {
	k := mustDecodeKey(t, "FTmQDvKxAi2H8zuj5A2EiWoypxRCYvupQNirSboqhGJi")
	short := mustDID(t, didkey.NodeDID, k, didkey.FormShort).String()
	tests := []struct {
		name, did, key string
		code           proto.Code
	}{
		// The DID is checked before the key, so a foreign method wins over a bad key.
		{"foreign method, bad key", "did:web:x", "nope", proto.IDBindingRequired},
		{"bad grammar, bad key", "did:svrp:n:XYZ", "nope", proto.IDBindingFailed},
		{"good DID, bad key", short, "nope", proto.IDBindingFailed},
		{"operator tag on a node", mustDID(t, didkey.OperatorDID, k, didkey.FormShort).String(), k.Hex(), proto.IDBindingFailed},
		{"other key", short, strings.Repeat("1", 32), proto.IDBindingFailed},
	}
	for _, tt := range tests {
		if _, _, err := didkey.CheckNode(tt.did, tt.key); proto.CodeOf(err) != tt.code {
			t.Errorf("%s: CheckNode = %v, want %s", tt.name, err, tt.code)
		}
	}
	if _, _, err := didkey.CheckOperator("did:web:x", "nope"); proto.CodeOf(err) != proto.IDBindingRequired {
		t.Errorf("CheckOperator on a foreign method = %v, want ID_BINDING_REQUIRED", err)
	}
}

func TestMatchesDoesNotAllocate(t *testing.T) {
	k := mustDecodeKey(t, "FTmQDvKxAi2H8zuj5A2EiWoypxRCYvupQNirSboqhGJi")
	for _, f := range []didkey.Form{didkey.FormShort, didkey.FormFallback, didkey.FormFull} {
		d := mustDID(t, didkey.NodeDID, k, f)
		if n := testing.AllocsPerRun(100, func() { d.Matches(k) }); n != 0 {
			t.Errorf("Matches on a %s DID allocates %v times", f, n)
		}
	}
}

var grammar = regexp.MustCompile(`^did:svrp:(?:[0-9a-f]{64}|(?:[a-z0-9]:)?(?:[0-9a-f]{8}|[0-9a-f]{10}))$`)

func drawKey(t *rapid.T, label string) didkey.PublicKey {
	var k didkey.PublicKey
	copy(k[:], rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, label))
	return k
}

func TestPropDeriveParseVerify(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := drawKey(t, "key")
		other := drawKey(t, "other")
		if other == k {
			other[0] ^= 1
		}
		if got, err := didkey.DecodeKey(k.Hex()); err != nil || got != k {
			t.Fatalf("DecodeKey(Hex) = %s, %v", got, err)
		}
		if got, err := didkey.DecodeKey(k.Base58()); err != nil || got != k {
			t.Fatalf("DecodeKey(Base58 %q) = %s, %v", k.Base58(), got, err)
		}
		for _, f := range []didkey.Form{didkey.FormShort, didkey.FormFallback, didkey.FormFull} {
			d, err := didkey.NodeDID(k, f)
			if err != nil {
				t.Fatalf("NodeDID(%s): %v", f, err)
			}
			p, err := didkey.Parse(d.String())
			if err != nil || p != d || p.String() != d.String() || p.Form() != f {
				t.Fatalf("Parse(%q) = %#v, %v; want %#v", d, p, err, d)
			}
			if !p.Matches(k) {
				t.Fatalf("%q does not match its own key", d)
			}
			for _, enc := range []string{k.Hex(), k.Base58()} {
				if _, got, err := didkey.CheckNode(d.String(), enc); err != nil || got != k {
					t.Fatalf("CheckNode(%q, %q) = %s, %v", d, enc, got, err)
				}
			}
			// A short body is a 32-bit hash prefix, so another key may share it; the
			// test asks only that Matches agrees with the derivation.
			otherDID, _ := didkey.NodeDID(other, f)
			if p.Matches(other) != (otherDID.Body() == d.Body()) {
				t.Fatalf("%q Matches(other) = %v, bodies %s and %s", d, p.Matches(other), d.Body(), otherDID.Body())
			}
			if f == didkey.FormFull {
				if got, ok := p.Key(); !ok || got != k {
					t.Fatalf("Key() = %s, %v", got, ok)
				}
				continue
			}
			o, err := didkey.OperatorDID(k, f)
			if err != nil {
				t.Fatalf("OperatorDID(%s): %v", f, err)
			}
			po, err := didkey.Parse(o.String())
			if err != nil || po != o || !po.IsOperator() || po.Body() != d.Body() {
				t.Fatalf("Parse(%q) = %#v, %v", o, po, err)
			}
			if _, _, err := didkey.CheckOperator(o.String(), k.Base58()); err != nil {
				t.Fatalf("CheckOperator(%q): %v", o, err)
			}
			if _, _, err := didkey.CheckNode(o.String(), k.Base58()); proto.CodeOf(err) != proto.IDBindingFailed {
				t.Fatalf("CheckNode accepted operator DID %q: %v", o, err)
			}
		}
	})
}

func TestPropStringInvertsParse(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.OneOf(
			rapid.StringMatching(grammar.String()),
			rapid.StringMatching(`did:svrp:[a-zA-Z0-9:]{0,3}[0-9a-fA-F]{6,12}`),
			rapid.Map(rapid.String(), func(s string) string { return "did:svrp:" + s }),
			rapid.String(),
		).Draw(t, "s")
		d, err := didkey.Parse(s)
		if want := grammar.MatchString(s); (err == nil) != want {
			t.Fatalf("Parse(%q) error %v, grammar says %v", s, err, want)
		}
		if err != nil {
			return
		}
		if d.String() != s {
			t.Fatalf("Parse(%q).String() = %q", s, d)
		}
		if again, err := didkey.Parse(d.String()); err != nil || again != d {
			t.Fatalf("Parse(String()) = %#v, %v; want %#v", again, err, d)
		}
	})
}

func benchKey(b *testing.B) didkey.PublicKey {
	return keyFromSeed(b, "fdd9b472318ade8873911fca44ccc714a4f8a80e85ed5e92e00bf2e4b615882c")
}

func BenchmarkMatches(b *testing.B) {
	k := benchKey(b)
	for _, f := range []didkey.Form{didkey.FormShort, didkey.FormFallback, didkey.FormFull} {
		d := mustDID(b, didkey.NodeDID, k, f)
		b.Run(f.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !d.Matches(k) {
					b.Fatal("no match")
				}
			}
		})
	}
}

func BenchmarkCheckNode(b *testing.B) {
	k := benchKey(b)
	did := mustDID(b, didkey.NodeDID, k, didkey.FormShort).String()
	for _, enc := range []struct{ name, key string }{{"hex", k.Hex()}, {"base58", k.Base58()}} {
		b.Run(enc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := didkey.CheckNode(did, enc.key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecodeKey(b *testing.B) {
	k := benchKey(b)
	for _, enc := range []struct{ name, key string }{{"hex", k.Hex()}, {"base58", k.Base58()}} {
		b.Run(enc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := didkey.DecodeKey(enc.key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
