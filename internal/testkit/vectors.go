package testkit

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// The files are shared with other implementations, so the types follow them as published
// rather than restating their cases in Go; a field a test does not read is still named, so that
// one type serves every package.

// Signer is one named key of canonical.json or extensions.json.
type Signer struct {
	SeedHex      string `json:"seed_hex"`
	PublicKeyHex string `json:"public_key_hex"`
	PublicKeyB58 string `json:"public_key_b58"`
}

// MessageSpec describes one signed message: its domain (or domain suffix) and field order.
type MessageSpec struct {
	Name         string   `json:"name"`
	Domain       string   `json:"domain"`
	DomainSuffix string   `json:"domain_suffix"`
	SignedBy     string   `json:"signed_by"`
	Fields       []string `json:"fields"`
}

// SignedCase is one message of canonical.json or extensions.json with its exact bytes and
// signature.
type SignedCase struct {
	ID                string          `json:"id"`
	Name              string          `json:"name"`
	Message           int             `json:"message"`
	Prefix            string          `json:"prefix"`
	Domain            string          `json:"domain"`
	Fields            json.RawMessage `json:"fields"`
	ExpectedUTF8      string          `json:"expected_utf8"`
	ExpectedHex       string          `json:"expected_hex"`
	Signer            string          `json:"signer"`
	SeedHex           string          `json:"seed_hex"`
	PublicKeyHex      string          `json:"public_key_hex"`
	PublicKeyB58      string          `json:"public_key_b58"`
	SignatureB58      string          `json:"signature_b58"`
	AuthorizationCase string          `json:"authorization_case"`
}

// SignedFile is canonical.json or extensions.json.
type SignedFile struct {
	Messages map[string]MessageSpec `json:"messages"`
	Signers  map[string]Signer      `json:"signers"`
	Cases    []SignedCase           `json:"cases"`
}

// Reject is one case of rejects.json: a message with one field made wrong.
type Reject struct {
	ID         string          `json:"id"`
	Category   string          `json:"category"`
	Message    int             `json:"message"`
	Endpoint   string          `json:"endpoint"`
	Field      string          `json:"field"`
	Stage      string          `json:"stage"`
	Fields     json.RawMessage `json:"fields"`
	FieldsJSON string          `json:"fields_json"`
	// RawValue, when not empty, is the offending value as text that is not JSON.
	RawValue string         `json:"raw_value"`
	Expected RejectExpected `json:"expected"`
}

// RejectExpected is what a registry answers to a Reject.
type RejectExpected struct {
	HTTP                 int    `json:"http"`
	Code                 string `json:"code"`
	BeforeSignatureCheck bool   `json:"before_signature_check"`
	ChallengeConsumed    *bool  `json:"challenge_consumed"`
}

// Consumed reports whether the refusal spends the login challenge; absent means it does not.
func (e RejectExpected) Consumed() bool { return e.ChallengeConsumed != nil && *e.ChallengeConsumed }

// RejectsFile is rejects.json.
type RejectsFile struct {
	BaseFields map[string]json.RawMessage `json:"base_fields"`
	Cases      []Reject                   `json:"cases"`
}

// DIDKey is one key of dids.json with every spelling derived from it.
type DIDKey struct {
	Name                string `json:"name"`
	SeedHex             string `json:"seed_hex"`
	PublicKeyHex        string `json:"public_key_hex"`
	PublicKeyB58        string `json:"public_key_b58"`
	SHA256OfKeyHex      string `json:"sha256_of_key_hex"`
	Fingerprint         string `json:"fingerprint"`
	DIDShort            string `json:"did_short"`
	DIDFallback         string `json:"did_fallback"`
	DIDFull             string `json:"did_full"`
	DIDOperatorShort    string `json:"did_operator_short"`
	DIDOperatorFallback string `json:"did_operator_fallback"`
}

// DIDCase is one positive or negative case of dids.json; Expected is nil for a positive one.
type DIDCase struct {
	ID           string `json:"id"`
	DID          string `json:"did"`
	PublicKey    string `json:"public_key"`
	KeyEncoding  string `json:"key_encoding"`
	Role         string `json:"role"`
	Form         string `json:"form"`
	Tag          string `json:"tag"`
	Body         string `json:"body"`
	PublicKeyHex string `json:"public_key_hex"`
	Fingerprint  string `json:"fingerprint"`
	IDBinding    bool   `json:"id_binding"`
	Endpoint     string `json:"endpoint"`
	Stage        string `json:"stage"`
	GrammarOK    bool   `json:"grammar_ok"`
	Expected     *struct {
		HTTP int    `json:"http"`
		Code string `json:"code"`
	} `json:"expected"`
}

// CollisionKey is one of the two keys of dids.json whose short DIDs share a body.
type CollisionKey struct {
	DIDShort     string `json:"did_short"`
	DIDFallback  string `json:"did_fallback"`
	PublicKeyB58 string `json:"public_key_b58"`
	SeedHex      string `json:"seed_hex"`
}

// DIDsFile is dids.json.
type DIDsFile struct {
	Keys      []DIDKey  `json:"keys"`
	Positive  []DIDCase `json:"positive"`
	Negative  []DIDCase `json:"negative"`
	Collision struct {
		ShortBody string       `json:"short_body"`
		First     CollisionKey `json:"first"`
		Second    CollisionKey `json:"second"`
	} `json:"collision"`
}

// ShortCodesFile is shortcodes.json.
type ShortCodesFile struct {
	Alphabet string `json:"alphabet"`
	Length   int    `json:"length"`
	Cases    []struct {
		Input     string `json:"input"`
		Valid     bool   `json:"valid"`
		Canonical string `json:"canonical"`
		SHA256    string `json:"sha256_hex_of_canonical"`
	} `json:"cases"`
}

// Canonical reads canonical.json.
func Canonical(t testing.TB) SignedFile {
	t.Helper()
	return read(t, "canonical.json", func(v *SignedFile) []int { return []int{len(v.Cases), len(v.Messages), len(v.Signers)} })
}

// Extensions reads extensions.json.
func Extensions(t testing.TB) SignedFile {
	t.Helper()
	return read(t, "extensions.json", func(v *SignedFile) []int { return []int{len(v.Cases), len(v.Messages), len(v.Signers)} })
}

// Rejects reads rejects.json.
func Rejects(t testing.TB) RejectsFile {
	t.Helper()
	return read(t, "rejects.json", func(v *RejectsFile) []int { return []int{len(v.Cases)} })
}

// DIDs reads dids.json.
func DIDs(t testing.TB) DIDsFile {
	t.Helper()
	return read(t, "dids.json", func(v *DIDsFile) []int { return []int{len(v.Keys), len(v.Positive), len(v.Negative)} })
}

// ShortCodes reads shortcodes.json.
func ShortCodes(t testing.TB) ShortCodesFile {
	t.Helper()
	return read(t, "shortcodes.json", func(v *ShortCodesFile) []int { return []int{len(v.Cases)} })
}

// Raw returns a vector file's bytes as published, for a test that hands them on whole.
func Raw(t testing.TB, name string) []byte {
	t.Helper()
	dir, err := vectorDir()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// read decodes a file and fails the test when one of its parts, as counted by sizes, decoded to
// nothing: a renamed key in the file would otherwise leave a loop over its cases silently
// empty.
func read[T any](t testing.TB, name string, sizes func(*T) []int) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(Raw(t, name), &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for i, n := range sizes(&v) {
		if n == 0 {
			t.Fatalf("%s: part %d of the file is empty; want some cases", name, i+1)
		}
	}
	return v
}

var (
	rootOnce sync.Once
	rootPath string
	rootErr  error
)

// vectorDir is testdata/vectors at the module's root.
func vectorDir() (string, error) {
	root, err := moduleRoot()
	return filepath.Join(root, "testdata", "vectors"), err
}

// moduleRoot is the nearest folder above the test's working directory (its package) that
// holds go.mod, however deep the package is.
func moduleRoot() (string, error) {
	rootOnce.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			rootErr = err
			return
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				rootPath = dir
				return
			}
			up := filepath.Dir(dir)
			if up == dir {
				rootErr = os.ErrNotExist
				return
			}
			dir = up
		}
	})
	return rootPath, rootErr
}
