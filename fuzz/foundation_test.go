package fuzz

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
)

// Seeds come from the shared vectors, so every case a human wrote down is where the fuzzer
// starts. A target that loads none fails: a moved or renamed vector file must not leave the
// fuzzers running on nothing.

func requireVectorSeeds(f *testing.F, n int) {
	f.Helper()
	if n == 0 {
		f.Fatal("no seeds loaded from the vectors")
	}
	f.Logf("%d seeds from the vectors", n)
}

// messageSeeds returns every field set of message num in the vectors that fits type T:
// canonical.json cases (with their prefix), rejects.json cases and base fields (under the
// default prefix). Reject cases whose JSON does not fit the Go type are shape errors for
// the HTTP layer and are left out; NaN and ±1e400, which are not JSON, are set on the base
// fields by hand.
func messageSeeds[T canonical.Message](f *testing.F, num int) (prefixes []string, msgs []T) {
	f.Helper()
	c := testkit.Canonical(f)
	for _, cs := range c.Cases {
		var m T
		if cs.Message == num && json.Unmarshal(cs.Fields, &m) == nil {
			prefixes, msgs = append(prefixes, cs.Prefix), append(msgs, m)
		}
	}
	r := testkit.Rejects(f)
	base := r.BaseFields[strconv.Itoa(num)]
	var m T
	if json.Unmarshal(base, &m) == nil {
		prefixes, msgs = append(prefixes, canonical.DefaultPrefix), append(msgs, m)
	}
	for _, rc := range r.Cases {
		if rc.Message != num {
			continue
		}
		var m T
		if rc.RawValue != "" {
			v, err := strconv.ParseFloat(rc.RawValue, 64)
			if err != nil && !errors.Is(err, strconv.ErrRange) || json.Unmarshal(base, &m) != nil || !setSeedLimit(&m, rc.Field, v) {
				continue
			}
		} else if json.Unmarshal(rc.Fields, &m) != nil {
			continue
		}
		prefixes, msgs = append(prefixes, canonical.DefaultPrefix), append(msgs, m)
	}
	return prefixes, msgs
}

// extensionCases returns the message num cases of extensions.json: messages 10 to 12 of
// docs/protocol.md §10.
func extensionCases(f *testing.F, num int) []testkit.SignedCase {
	f.Helper()
	var out []testkit.SignedCase
	for _, c := range testkit.Extensions(f).Cases {
		if c.Message == num {
			out = append(out, c)
		}
	}
	requireVectorSeeds(f, len(out))
	return out
}

// extensionSeeds returns the prefix and fields of every message num case of extensions.json.
func extensionSeeds[T canonical.Message](f *testing.F, num int) (prefixes []string, msgs []T) {
	f.Helper()
	for _, c := range extensionCases(f, num) {
		var m T
		if err := json.Unmarshal(c.Fields, &m); err != nil {
			f.Fatalf("%s: %v", c.ID, err)
		}
		prefixes, msgs = append(prefixes, c.Prefix), append(msgs, m)
	}
	return prefixes, msgs
}

func setSeedLimit(m any, field string, v float64) bool {
	switch m := m.(type) {
	case *canonical.BindingSession:
		switch field {
		case "requested_single_limit":
			m.RequestedSingleLimit = &v
		case "requested_daily_limit":
			m.RequestedDailyLimit = &v
		default:
			return false
		}
	case *canonical.Authorization:
		switch field {
		case "single_limit":
			m.SingleLimit = &v
		case "daily_limit":
			m.DailyLimit = &v
		default:
			return false
		}
	default:
		return false
	}
	return true
}

// Fuzz arguments cannot be slices, so a list travels as one string split on '|'; "" is the
// empty list. Items containing '|' are out of reach, which costs nothing: '|' is an
// ordinary character to the rules under test.
func splitFuzzList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "|")
}

func joinFuzzList(items []string) string { return strings.Join(items, "|") }

// A limit travels as a presence flag and a value, nil being (false, 0).
func limitToArgs(v *float64) (bool, float64) {
	if v == nil {
		return false, 0
	}
	return true, *v
}

func argsToLimit(has bool, v float64) *float64 {
	if !has {
		return nil
	}
	return &v
}

// requireProtoCode fails unless err carries a protocol code, and the one expected.
func requireProtoCode(t *testing.T, err error, want proto.Code) {
	t.Helper()
	if got := proto.CodeOf(err); got == proto.Internal || got != want {
		t.Fatalf("error %q carries code %s, want %s", err, got, want)
	}
}

var (
	didGrammarRE   = regexp.MustCompile(`^did:svrp:(?:[0-9a-f]{64}|(?:[a-z0-9]:)?(?:[0-9a-f]{8}|[0-9a-f]{10}))$`)
	hexKeyRE       = regexp.MustCompile(`^[0-9a-f]{64}$`)
	domainPrefixRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
)

func FuzzParseDID(f *testing.F) {
	v := testkit.DIDs(f)
	n := 0
	add := func(s string) { f.Add(s); n++ }
	for _, k := range v.Keys {
		for _, s := range []string{k.DIDShort, k.DIDFallback, k.DIDFull, k.DIDOperatorShort, k.DIDOperatorFallback} {
			add(s)
		}
	}
	for _, c := range v.Positive {
		add(c.DID)
	}
	for _, c := range v.Negative {
		add(c.DID)
	}
	requireVectorSeeds(f, n)
	// The key the vectors' first DIDs derive from, so that seeds reach the matching branch.
	if len(v.Keys) == 0 {
		f.Fatal("dids.json has no keys")
	}
	key, err := didkey.DecodeKey(v.Keys[0].PublicKeyHex)
	if err != nil {
		f.Fatal(err)
	}

	f.Fuzz(func(t *testing.T, s string) {
		d, err := didkey.Parse(s)
		d2, err2 := didkey.Parse(s)
		if d != d2 || proto.CodeOf(err) != proto.CodeOf(err2) {
			t.Fatalf("Parse(%q) is not deterministic", s)
		}
		if err != nil {
			want := proto.IDBindingFailed
			if !strings.HasPrefix(s, "did:svrp:") {
				want = proto.IDBindingRequired
			}
			requireProtoCode(t, err, want)
			if !d.IsZero() {
				t.Fatalf("Parse(%q) returned %q with an error", s, d)
			}
			if didGrammarRE.MatchString(s) {
				t.Fatalf("Parse refused grammatical %q: %v", s, err)
			}
			if _, _, cerr := didkey.CheckNode(s, key.Hex()); proto.CodeOf(cerr) != want {
				t.Fatalf("CheckNode(%q) = %v, want %s as from Parse", s, cerr, want)
			}
			return
		}
		if !didGrammarRE.MatchString(s) {
			t.Fatalf("Parse accepted ungrammatical %q", s)
		}
		if d.String() != s {
			t.Fatalf("Parse(%q).String() = %q", s, d)
		}
		if text, _ := d.MarshalText(); string(text) != s {
			t.Fatalf("MarshalText = %q, want %q", text, s)
		}
		var u didkey.DID
		if err := u.UnmarshalText([]byte(s)); err != nil || u != d {
			t.Fatalf("UnmarshalText(%q) = %#v, %v; want %#v", s, u, err, d)
		}
		tag := ""
		if d.Tag() != "" {
			tag = d.Tag() + ":"
		}
		if "did:svrp:"+tag+d.Body() != s {
			t.Fatalf("tag %q and body %q do not spell %q", d.Tag(), d.Body(), s)
		}

		sum := sha256.Sum256(key[:])
		derived := hex.EncodeToString(sum[:])
		switch d.Form() {
		case didkey.FormFull:
			k, ok := d.Key()
			if !ok || k.Hex() != d.Body() {
				t.Fatalf("Key() of %q = %s, %v", s, k, ok)
			}
			if full, _ := didkey.NodeDID(k, didkey.FormFull); full != d || !d.Matches(k) {
				t.Fatalf("%q does not re-derive from its own key", s)
			}
			derived = key.Hex()
		case didkey.FormShort, didkey.FormFallback:
			if _, ok := d.Key(); ok {
				t.Fatalf("Key() of hashed form %q succeeded", s)
			}
		default:
			t.Fatalf("Parse(%q) gave form %s", s, d.Form())
		}
		matches := d.Body() == derived[:len(d.Body())]
		if d.Matches(key) != matches {
			t.Fatalf("%q Matches = %v, derivation says %v", s, d.Matches(key), matches)
		}

		_, _, nerr := didkey.CheckNode(s, key.Hex())
		_, _, oerr := didkey.CheckOperator(s, key.Base58())
		switch {
		case d.IsOperator():
			requireProtoCode(t, nerr, proto.IDBindingFailed)
			if (oerr == nil) != matches {
				t.Fatalf("CheckOperator(%q) = %v, derivation says %v", s, oerr, matches)
			}
		default:
			requireProtoCode(t, oerr, proto.IDBindingFailed)
			if (nerr == nil) != matches {
				t.Fatalf("CheckNode(%q) = %v, derivation says %v", s, nerr, matches)
			}
		}
		for _, e := range []error{nerr, oerr} {
			if e != nil {
				requireProtoCode(t, e, proto.IDBindingFailed)
			}
		}
	})
}

func FuzzDecodeKey(f *testing.F) {
	v := testkit.DIDs(f)
	c := testkit.Canonical(f)
	n := 0
	add := func(s string) { f.Add(s); n++ }
	for _, k := range v.Keys {
		add(k.PublicKeyHex)
		add(k.PublicKeyB58)
	}
	for _, p := range v.Positive {
		add(p.PublicKey)
	}
	for _, p := range v.Negative {
		add(p.PublicKey)
	}
	for _, s := range c.Signers {
		add(s.PublicKeyHex)
		add(s.PublicKeyB58)
	}
	requireVectorSeeds(f, n)

	f.Fuzz(func(t *testing.T, s string) {
		k, err := didkey.DecodeKey(s)
		k2, err2 := didkey.DecodeKey(s)
		if k != k2 || proto.CodeOf(err) != proto.CodeOf(err2) {
			t.Fatalf("DecodeKey(%q) is not deterministic", s)
		}
		isHex := hexKeyRE.MatchString(s)
		if err != nil {
			requireProtoCode(t, err, proto.IDBindingFailed)
			if k != (didkey.PublicKey{}) {
				t.Fatalf("DecodeKey(%q) returned %s with an error", s, k)
			}
			if isHex {
				t.Fatalf("DecodeKey refused hex %q: %v", s, err)
			}
			return
		}
		// Each key has one hex and one base58 spelling, and the input must be one of them.
		if isHex && k.Hex() != s || !isHex && k.Base58() != s {
			t.Fatalf("DecodeKey(%q) = %s does not re-encode to the input (hex=%v)", s, k, isHex)
		}
		for _, enc := range []string{k.Hex(), k.Base58()} {
			if back, err := didkey.DecodeKey(enc); err != nil || back != k {
				t.Fatalf("DecodeKey(%q) = %s, %v; want %s", enc, back, err, k)
			}
		}
	})
}

func FuzzParseTime(f *testing.F) {
	c := testkit.Canonical(f)
	r := testkit.Rejects(f)
	n := 0
	for _, cs := range c.Cases {
		var fields map[string]any
		if json.Unmarshal(cs.Fields, &fields) != nil {
			continue
		}
		for _, name := range []string{"issued_at", "expires_at", "created_at"} {
			if s, ok := fields[name].(string); ok {
				f.Add(s)
				n++
			}
		}
	}
	for _, rc := range r.Cases {
		var fields map[string]any
		if (rc.Category == "timestamp" || rc.Category == "calendar") && json.Unmarshal(rc.Fields, &fields) == nil {
			if s, ok := fields[rc.Field].(string); ok {
				f.Add(s)
				n++
			}
		}
	}
	requireVectorSeeds(f, n)

	f.Fuzz(func(t *testing.T, s string) {
		tm, err := canonical.ParseTime(s)
		tm2, err2 := canonical.ParseTime(s)
		if !tm.Equal(tm2) || proto.CodeOf(err) != proto.CodeOf(err2) {
			t.Fatalf("ParseTime(%q) is not deterministic", s)
		}
		if err != nil {
			requireProtoCode(t, err, proto.BadRequest)
			if !tm.IsZero() {
				t.Fatalf("ParseTime(%q) returned %v with an error", s, tm)
			}
			return
		}
		if got := canonical.FormatTime(tm); got != s {
			t.Fatalf("FormatTime(ParseTime(%q)) = %q", s, got)
		}
		if tm.Location() != time.UTC || tm.Nanosecond() != 0 {
			t.Fatalf("ParseTime(%q) = %v, want whole seconds in UTC", s, tm)
		}
		// The standard parser is looser (signs in the year, fractions), never stricter, so
		// whatever ParseTime takes it must take and read the same way.
		std, err := time.Parse(canonical.TimeLayout, s)
		if err != nil || !std.Equal(tm) {
			t.Fatalf("time.Parse(%q) = %v, %v; ParseTime gave %v", s, std, err, tm)
		}
	})
}

// signedField is one signed field: the value's rendering as the protocol writes it, and whether
// the protocol lets the value be signed at all. The rules are restated here, apart from the
// package's own checks.
type signedField struct {
	name  string
	valid bool
	want  string                 // exact rendering, unless check is set
	check func(got string) error // for numbers, whose rendering is checked by reading it back
}

func signableString(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

func strField(name, s string) signedField {
	return signedField{name: name, valid: signableString(s), want: s}
}

func listField(name string, items []string) signedField {
	ok := true
	for _, it := range items {
		ok = ok && it != "" && !strings.Contains(it, ",") && signableString(it)
	}
	return signedField{name: name, valid: ok, want: strings.Join(slices.Sorted(slices.Values(items)), ",")}
}

func numberField(name string, v *float64) signedField {
	if v == nil {
		return signedField{name: name, valid: true, want: ""}
	}
	x := *v
	return signedField{name: name, valid: x >= 0 && x <= canonical.MaxLimit, check: func(got string) error {
		back, err := strconv.ParseFloat(got, 64)
		switch {
		case err != nil || back != x:
			return errors.New("does not read back as the value")
		case strings.ContainsAny(got, "eE+-"):
			return errors.New("has an exponent or a sign")
		case strings.Contains(got, ".") && strings.HasSuffix(got, "0"), strings.HasSuffix(got, "."):
			return errors.New("has a trailing zero or point")
		case x == 0 && got != "0":
			return errors.New("zero is not 0")
		}
		return nil
	}}
}

func boolField(name string, v bool) signedField {
	want := "False"
	if v {
		want = "True"
	}
	return signedField{name: name, valid: true, want: want}
}

func intField(name string, v int64) signedField {
	return signedField{name: name, valid: true, want: strconv.FormatInt(v, 10)}
}

// checkSignedMessage is the common oracle of the message targets. Bytes must be deterministic; it
// must refuse exactly the inputs the protocol refuses, with BAD_REQUEST naming the first bad
// field and no bytes; and what it accepts must split on LF into the domain line and exactly
// the fields, each rendered by the protocol's rule. That last property is what makes the
// encoding injective. It returns the bytes, nil when refused.
func checkSignedMessage(t *testing.T, prefix, domain string, m canonical.Message, fields ...signedField) []byte {
	t.Helper()
	b, err := m.Bytes(prefix)
	b2, err2 := m.Bytes(prefix)
	if !bytes.Equal(b, b2) || (err == nil) != (err2 == nil) || err != nil && err.Error() != err2.Error() {
		t.Fatalf("Bytes is not deterministic: %q, %v then %q, %v", b, err, b2, err2)
	}
	firstBad := ""
	if !domainPrefixRE.MatchString(prefix) {
		firstBad = "prefix"
	} else {
		for _, f := range fields {
			if !f.valid {
				firstBad = f.name
				break
			}
		}
	}
	if err != nil {
		requireProtoCode(t, err, proto.BadRequest)
		if b != nil {
			t.Fatalf("Bytes returned %q with an error", b)
		}
		if firstBad == "" {
			t.Fatalf("Bytes refused a message the protocol accepts: %v", err)
		}
		if !strings.Contains(err.Error(), firstBad) {
			t.Fatalf("error %q does not name %s, the first bad field", err, firstBad)
		}
		return nil
	}
	if firstBad != "" {
		t.Fatalf("Bytes accepted a message whose %s breaks the rules: %q", firstBad, b)
	}
	parts := strings.Split(string(b), "\n")
	if len(parts) != 1+len(fields) {
		t.Fatalf("bytes %q split into %d parts, want the domain and %d fields", b, len(parts), len(fields))
	}
	if parts[0] != prefix+domain {
		t.Fatalf("domain line %q, want %q", parts[0], prefix+domain)
	}
	for i, f := range fields {
		got := parts[i+1]
		if f.check != nil {
			if err := f.check(got); err != nil {
				t.Fatalf("field %s renders as %q, which %v", f.name, got, err)
			}
		} else if got != f.want {
			t.Fatalf("field %s renders as %q, want %q", f.name, got, f.want)
		}
	}
	return b
}

// fuzzNodeTS is the target of a node message that is only the node's DID, in the field
// didField, and a ts: the heartbeat and the poll.
func fuzzNodeTS[T authn.NodeMessage](f *testing.F, prefixes []string, msgs []T, domain, didField string, build func(did string, ts int64) T) {
	for i, m := range msgs {
		did, ts := m.Signer()
		f.Add(prefixes[i], did, ts)
	}
	f.Fuzz(func(t *testing.T, prefix, did string, ts int64) {
		checkSignedMessage(t, prefix, domain, build(did, ts), strField(didField, did), intField("ts", ts))
	})
}

// fuzzSessionTS is the target of a node message about a binding session: the session's id,
// the node's DID and a ts (the node's cancel and unbind).
func fuzzSessionTS[T authn.NodeMessage](f *testing.F, prefixes []string, msgs []T, domain string, sessionID func(T) string, build func(id, nodeDID string, ts int64) T) {
	for i, m := range msgs {
		did, ts := m.Signer()
		f.Add(prefixes[i], sessionID(m), did, ts)
	}
	f.Fuzz(func(t *testing.T, prefix, id, nodeDID string, ts int64) {
		checkSignedMessage(t, prefix, domain, build(id, nodeDID, ts),
			strField("binding_session_id", id), strField("node_did", nodeDID), intField("ts", ts))
	})
}

func FuzzLogin(f *testing.F) {
	prefixes, msgs := messageSeeds[canonical.Login](f, 1)
	for i, m := range msgs {
		f.Add(prefixes[i], m.OperatorDID, m.DevicePublicKey, m.Challenge, m.IssuedAt)
	}
	requireVectorSeeds(f, len(msgs))
	f.Fuzz(func(t *testing.T, prefix, operatorDID, devicePublicKey, challenge, issuedAt string) {
		m := canonical.Login{OperatorDID: operatorDID, DevicePublicKey: devicePublicKey, Challenge: challenge, IssuedAt: issuedAt}
		checkSignedMessage(t, prefix, canonical.LoginDomain, m,
			strField("operator_did", operatorDID), strField("device_public_key", devicePublicKey),
			strField("challenge", challenge), strField("issued_at", issuedAt))
	})
}

func FuzzDeviceCredential(f *testing.F) {
	prefixes, msgs := messageSeeds[canonical.DeviceCredential](f, 2)
	for i, m := range msgs {
		f.Add(prefixes[i], m.CredentialID, m.OperatorDID, m.OperatorRootPublicKey, m.DeviceID, m.DevicePublicKey,
			joinFuzzList(m.Permissions), m.IssuedAt, m.ExpiresAt, m.RevocationID)
	}
	requireVectorSeeds(f, len(msgs))
	f.Fuzz(func(t *testing.T, prefix, credentialID, operatorDID, rootKey, deviceID, deviceKey, permissions, issuedAt, expiresAt, revocationID string) {
		perms := splitFuzzList(permissions)
		m := canonical.DeviceCredential{
			CredentialID: credentialID, OperatorDID: operatorDID, OperatorRootPublicKey: rootKey,
			DeviceID: deviceID, DevicePublicKey: deviceKey, Permissions: perms,
			IssuedAt: issuedAt, ExpiresAt: expiresAt, RevocationID: revocationID,
		}
		checkSignedMessage(t, prefix, canonical.DeviceCredentialDomain, m,
			strField("credential_id", credentialID), strField("operator_did", operatorDID),
			strField("operator_root_public_key", rootKey), strField("device_id", deviceID),
			strField("device_public_key", deviceKey), listField("permissions", perms),
			strField("issued_at", issuedAt), strField("expires_at", expiresAt), strField("revocation_id", revocationID))
	})
}

func FuzzRegister(f *testing.F) {
	prefixes, msgs := messageSeeds[canonical.Register](f, 3)
	for i, m := range msgs {
		f.Add(prefixes[i], m.DID, m.PublicKey, m.Endpoint, joinFuzzList(m.Capabilities), m.Region)
	}
	requireVectorSeeds(f, len(msgs))
	f.Fuzz(func(t *testing.T, prefix, did, publicKey, endpoint, capabilities, region string) {
		caps := splitFuzzList(capabilities)
		m := canonical.Register{DID: did, PublicKey: publicKey, Endpoint: endpoint, Capabilities: caps, Region: region}
		checkSignedMessage(t, prefix, canonical.RegisterDomain, m,
			strField("did", did), strField("public_key", publicKey), strField("endpoint", endpoint),
			listField("capabilities", caps), strField("region", region))
	})
}

func FuzzHeartbeat(f *testing.F) {
	prefixes, msgs := messageSeeds[canonical.Heartbeat](f, 4)
	requireVectorSeeds(f, len(msgs))
	fuzzNodeTS(f, prefixes, msgs, canonical.HeartbeatDomain, "did", func(did string, ts int64) canonical.Heartbeat {
		return canonical.Heartbeat{DID: did, TS: ts}
	})
}

func FuzzPoll(f *testing.F) {
	prefixes, msgs := messageSeeds[canonical.Poll](f, 5)
	requireVectorSeeds(f, len(msgs))
	fuzzNodeTS(f, prefixes, msgs, canonical.PollDomain, "node_did", func(nodeDID string, ts int64) canonical.Poll {
		return canonical.Poll{NodeDID: nodeDID, TS: ts}
	})
}

func FuzzBindingSession(f *testing.F) {
	prefixes, msgs := messageSeeds[canonical.BindingSession](f, 6)
	for i, m := range msgs {
		hasSingle, single := limitToArgs(m.RequestedSingleLimit)
		hasDaily, daily := limitToArgs(m.RequestedDailyLimit)
		f.Add(prefixes[i], m.BindingSessionID, m.NodeDID, m.NodePublicKey, m.DeviceSummary, m.OS, m.Region,
			joinFuzzList(m.RequestedTaskTypes), hasSingle, single, hasDaily, daily, m.Nonce, m.CreatedAt, m.ExpiresAt)
	}
	requireVectorSeeds(f, len(msgs))
	f.Fuzz(func(t *testing.T, prefix, id, nodeDID, nodeKey, deviceSummary, os, region, taskTypes string,
		hasSingle bool, single float64, hasDaily bool, daily float64, nonce, createdAt, expiresAt string) {
		tasks := splitFuzzList(taskTypes)
		m := canonical.BindingSession{
			BindingSessionID: id, NodeDID: nodeDID, NodePublicKey: nodeKey, DeviceSummary: deviceSummary,
			OS: os, Region: region, RequestedTaskTypes: tasks,
			RequestedSingleLimit: argsToLimit(hasSingle, single), RequestedDailyLimit: argsToLimit(hasDaily, daily),
			Nonce: nonce, CreatedAt: createdAt, ExpiresAt: expiresAt,
		}
		checkSignedMessage(t, prefix, canonical.BindingSessionDomain, m,
			strField("binding_session_id", id), strField("node_did", nodeDID), strField("node_public_key", nodeKey),
			strField("device_summary", deviceSummary), strField("os", os), strField("region", region),
			listField("requested_task_types", tasks),
			numberField("requested_single_limit", m.RequestedSingleLimit), numberField("requested_daily_limit", m.RequestedDailyLimit),
			strField("nonce", nonce), strField("created_at", createdAt), strField("expires_at", expiresAt))
	})
}

func FuzzAuthorization(f *testing.F) {
	prefixes, msgs := messageSeeds[canonical.Authorization](f, 7)
	for i, m := range msgs {
		hasSingle, single := limitToArgs(m.SingleLimit)
		hasDaily, daily := limitToArgs(m.DailyLimit)
		f.Add(prefixes[i], m.BindingSessionID, m.NodeDID, m.OperatorDID, joinFuzzList(m.TaskTypes),
			hasSingle, single, hasDaily, daily, m.RevocationID, m.IssuedAt, m.ExpiresAt)
	}
	requireVectorSeeds(f, len(msgs))
	f.Fuzz(func(t *testing.T, prefix, id, nodeDID, operatorDID, taskTypes string,
		hasSingle bool, single float64, hasDaily bool, daily float64, revocationID, issuedAt, expiresAt string) {
		tasks := splitFuzzList(taskTypes)
		m := canonical.Authorization{
			BindingSessionID: id, NodeDID: nodeDID, OperatorDID: operatorDID, TaskTypes: tasks,
			SingleLimit: argsToLimit(hasSingle, single), DailyLimit: argsToLimit(hasDaily, daily),
			RevocationID: revocationID, IssuedAt: issuedAt, ExpiresAt: expiresAt,
		}
		b := checkSignedMessage(t, prefix, canonical.AuthorizationDomain, m,
			strField("binding_session_id", id), strField("node_did", nodeDID), strField("operator_did", operatorDID),
			listField("task_types", tasks), numberField("single_limit", m.SingleLimit), numberField("daily_limit", m.DailyLimit),
			strField("revocation_id", revocationID), strField("issued_at", issuedAt), strField("expires_at", expiresAt))
		digest, err := m.Digest(prefix)
		if b == nil {
			requireProtoCode(t, err, proto.BadRequest)
			if digest != "" {
				t.Fatalf("Digest = %q with an error", digest)
			}
			return
		}
		if sum := sha256.Sum256(b); err != nil || digest != hex.EncodeToString(sum[:]) {
			t.Fatalf("Digest = %q, %v; want the SHA-256 of the bytes", digest, err)
		}
	})
}

func FuzzAcceptance(f *testing.F) {
	prefixes, msgs := messageSeeds[canonical.Acceptance](f, 8)
	for i, m := range msgs {
		f.Add(prefixes[i], m.BindingSessionID, m.NodeDID, m.OperatorDID, m.AuthorizationDigest, m.Accepted, m.IssuedAt)
	}
	requireVectorSeeds(f, len(msgs))
	f.Fuzz(func(t *testing.T, prefix, id, nodeDID, operatorDID, digest string, accepted bool, issuedAt string) {
		m := canonical.Acceptance{BindingSessionID: id, NodeDID: nodeDID, OperatorDID: operatorDID, AuthorizationDigest: digest, Accepted: accepted, IssuedAt: issuedAt}
		checkSignedMessage(t, prefix, canonical.AcceptanceDomain, m,
			strField("binding_session_id", id), strField("node_did", nodeDID), strField("operator_did", operatorDID),
			strField("authorization_digest", digest), boolField("accepted", accepted), strField("issued_at", issuedAt))
	})
}

func FuzzCancel(f *testing.F) {
	prefixes, msgs := messageSeeds[canonical.Cancel](f, 9)
	requireVectorSeeds(f, len(msgs))
	fuzzSessionTS(f, prefixes, msgs, canonical.CancelDomain, func(m canonical.Cancel) string { return m.BindingSessionID },
		func(id, nodeDID string, ts int64) canonical.Cancel {
			return canonical.Cancel{BindingSessionID: id, NodeDID: nodeDID, TS: ts}
		})
}

// The messages of docs/protocol.md §10 follow the same rules; their seeds are the cases of
// extensions.json.

func FuzzRegisterV2(f *testing.F) {
	prefixes, msgs := extensionSeeds[canonical.RegisterV2](f, 10)
	for i, m := range msgs {
		f.Add(prefixes[i], m.DID, m.PublicKey, m.Endpoint, joinFuzzList(m.Capabilities), m.Region, m.TS)
	}
	f.Fuzz(func(t *testing.T, prefix, did, publicKey, endpoint, capabilities, region string, ts int64) {
		caps := splitFuzzList(capabilities)
		m := canonical.RegisterV2{DID: did, PublicKey: publicKey, Endpoint: endpoint, Capabilities: caps, Region: region, TS: ts}
		checkSignedMessage(t, prefix, canonical.RegisterV2Domain, m,
			strField("did", did), strField("public_key", publicKey), strField("endpoint", endpoint),
			listField("capabilities", caps), strField("region", region), intField("ts", ts))
	})
}

func FuzzRevocation(f *testing.F) {
	prefixes, msgs := extensionSeeds[canonical.Revocation](f, 11)
	for i, m := range msgs {
		f.Add(prefixes[i], m.OperatorDID, m.OperatorRootPublicKey, m.RevocationID, m.RevokedAt)
	}
	f.Fuzz(func(t *testing.T, prefix, did, key, id, at string) {
		m := canonical.Revocation{OperatorDID: did, OperatorRootPublicKey: key, RevocationID: id, RevokedAt: at}
		checkSignedMessage(t, prefix, canonical.RevocationDomain, m,
			strField("operator_did", did), strField("operator_root_public_key", key),
			strField("revocation_id", id), strField("revoked_at", at))
	})
}

func FuzzUnbind(f *testing.F) {
	prefixes, msgs := extensionSeeds[canonical.Unbind](f, 12)
	fuzzSessionTS(f, prefixes, msgs, canonical.UnbindDomain, func(m canonical.Unbind) string { return m.BindingSessionID },
		func(id, nodeDID string, ts int64) canonical.Unbind {
			return canonical.Unbind{BindingSessionID: id, NodeDID: nodeDID, TS: ts}
		})
}
