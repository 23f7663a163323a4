package binding_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mr-tron/base58"

	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
)

func TestShortCodeVectors(t *testing.T) {
	v := testkit.ShortCodes(t)
	if v.Alphabet != binding.ShortCodeAlphabet || v.Length != binding.ShortCodeLength {
		t.Fatalf("vectors use alphabet %q length %d", v.Alphabet, v.Length)
	}
	if len(v.Cases) == 0 {
		t.Fatal("no cases loaded")
	}
	valid := 0
	for _, c := range v.Cases {
		got := binding.NormalizeCode(c.Input)
		if binding.ValidShortCode(got) != c.Valid {
			t.Errorf("%q → %q: valid %v, want %v", c.Input, got, !c.Valid, c.Valid)
			continue
		}
		if binding.NormalizeCode(got) != got {
			t.Errorf("%q: normalising twice changes %q", c.Input, got)
		}
		if !c.Valid {
			continue
		}
		valid++
		if got != c.Canonical {
			t.Errorf("%q → %q, want %q", c.Input, got, c.Canonical)
		}
		h := binding.HashSecret(got)
		if hex.EncodeToString(h[:]) != c.SHA256 {
			t.Errorf("%q: hash %x, want %s", c.Input, h, c.SHA256)
		}
		if norm, isCode := binding.NormalizePresented(c.Input); !isCode || norm != c.Canonical {
			t.Errorf("NormalizePresented(%q) = %q, %v", c.Input, norm, isCode)
		}
	}
	t.Logf("%d cases, %d valid", len(v.Cases), valid)
}

func TestNormalizePresentedLeavesTokensAlone(t *testing.T) {
	r := rand.NewChaCha8([32]byte{1})
	for range 200 {
		tok, err := binding.NewBindingToken(r)
		if err != nil {
			t.Fatal(err)
		}
		if norm, isCode := binding.NormalizePresented(tok); isCode || norm != tok {
			t.Fatalf("token %q taken for a code (%q)", tok, norm)
		}
	}
	// A base58 token is case-sensitive: upper-casing it would make it another token.
	if norm, _ := binding.NormalizePresented("3yQ-abc def-ghijklmnopq"); norm != "3yQ-abc def-ghijklmnopq" {
		t.Fatalf("a long string was normalised to %q", norm)
	}
}

// TestNewShortCodeUniform draws codes from a seeded source and checks the symbol counts with
// a chi-square test: with 31 symbols (30 degrees of freedom), 59.70 is the 0.1% critical
// value. Keeping the bytes from 248 up (a plain b % 31) would give the first eight symbols 9
// byte values of 256 and the others 8; over the 10^6 symbols drawn here that bias alone
// scores about 2800.
func TestNewShortCodeUniform(t *testing.T) {
	src := rand.NewChaCha8([32]byte{'s', 'v', 'r', 'p'})
	counts := map[byte]int{}
	const codes = 125_000
	for range codes {
		code, err := binding.NewShortCode(src)
		if err != nil {
			t.Fatal(err)
		}
		if !binding.ValidShortCode(code) {
			t.Fatalf("drew %q, not a short code", code)
		}
		for i := 0; i < len(code); i++ {
			counts[code[i]]++
		}
	}
	if len(counts) != len(binding.ShortCodeAlphabet) {
		t.Fatalf("drew %d distinct symbols, want %d", len(counts), len(binding.ShortCodeAlphabet))
	}
	expected := float64(codes*binding.ShortCodeLength) / float64(len(binding.ShortCodeAlphabet))
	chi2 := 0.0
	for _, n := range counts {
		d := float64(n) - expected
		chi2 += d * d / expected
	}
	t.Logf("chi-square %.1f over %d symbols", chi2, codes*binding.ShortCodeLength)
	if chi2 > 59.70 {
		t.Fatalf("chi-square %.1f > 59.70: the symbols are not uniform", chi2)
	}
}

func TestNewShortCodeRejectsHighBytes(t *testing.T) {
	in := []byte{248, 249, 250, 251, 252, 253, 254, 255, 0, 30, 31, 247, 62, 1, 2, 3}
	code, err := binding.NewShortCode(bytes.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if code != "2Z2Z2345" {
		t.Fatalf("code %q, want 2Z2Z2345 (bytes from 248 up dropped, the rest mod 31)", code)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("entropy exhausted") }

type constReader byte

func (c constReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(c)
	}
	return len(p), nil
}

func TestRandomSourceFailures(t *testing.T) {
	for name, r := range map[string]io.Reader{
		"failing": failingReader{},
		"short":   bytes.NewReader([]byte{1, 2, 3}),
		"stuck":   constReader(0xff),
	} {
		if code, err := binding.NewShortCode(r); err == nil || proto.CodeOf(err) != proto.Internal {
			t.Errorf("%s source: NewShortCode = %q, %v; want an INTERNAL error", name, code, err)
		}
	}
	if tok, err := binding.NewBindingToken(failingReader{}); err == nil || proto.CodeOf(err) != proto.Internal {
		t.Errorf("failing source: NewBindingToken = %q, %v", tok, err)
	}
}

func TestNewBindingToken(t *testing.T) {
	r := rand.NewChaCha8([32]byte{2})
	seen := map[string]bool{}
	for range 1000 {
		tok, err := binding.NewBindingToken(r)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := base58.Decode(tok)
		if err != nil || len(raw) != binding.BindingTokenBytes {
			t.Fatalf("token %q is not base58 of 16 bytes", tok)
		}
		if seen[tok] {
			t.Fatalf("token %q drawn twice", tok)
		}
		seen[tok] = true
	}
	// All-zero bytes give the shortest token, still far from a code's length.
	if tok, _ := binding.NewBindingToken(constReader(0)); tok != strings.Repeat("1", 16) {
		t.Fatalf("zero token %q", tok)
	}
}

func TestHashSecret(t *testing.T) {
	h := binding.HashSecret("QMD7RJT8")
	if got := hex.EncodeToString(h[:]); got != "b0c8d26f9ce072ff662338269afbf5cefea27c4f612c810ca5a1d139e7267408" {
		t.Fatalf("HashSecret = %s", got)
	}
	if binding.HashSecret("abc") == binding.HashSecret("ABC") {
		t.Fatal("HashSecret maps case; tokens are case-sensitive")
	}
}
