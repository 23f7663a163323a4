package registry_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"go/ast"
	"go/token"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/store"
)

// TestEnumerationSameBytes: a code that never existed, one that expired, one already used,
// one whose session was cancelled, and the same for binding tokens, all get byte-for-byte the
// same answer: status, headers that describe the body, and body.
func TestEnumerationSameBytes(t *testing.T) {
	w := newArena(t)
	used := w.drive(w.n, w.op, w.token, "bs-used", "INITIATED").ini
	w.ok("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: used.ShortCode}, w.token, nil)
	cancelled := w.drive(w.n, w.op, w.token, "bs-cancelled", "INITIATED").ini
	w.ok("POST", "/v1/bindings/bs-cancelled/cancel", w.n.cancelRequest(t, "bs-cancelled", w.n.did, w.now()), "", nil)
	authorized := w.drive(w.n, w.op, w.token, "bs-authorized", "INITIATED").ini
	var view api.ResolveView
	w.ok("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: authorized.ShortCode}, w.token, &view)
	w.ok("POST", "/v1/bindings/authorize", w.op.authorize(t, view, w.now(), num(5), num(50)), w.token, nil)
	authorizedCode := authorized.ShortCode
	expiring := w.drive(w.n, w.op, w.token, "bs-expiring", "INITIATED").ini
	w.clock.Advance(11 * time.Minute)
	// A session that expired stays INITIATED in the store until a sweep; the answer must not
	// depend on whether the sweep ran.
	swept := w.drive(w.n, w.op, w.token, "bs-swept", "INITIATED").ini
	w.clock.Advance(11 * time.Minute)
	if err := w.svc.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}

	cases := map[string]api.ResolveRequest{
		"code never issued":     {ShortCode: "ZZZZZZZZ"},
		"code authorized":       {ShortCode: authorizedCode},
		"code used":             {ShortCode: used.ShortCode},
		"code used, lowercase":  {ShortCode: strings.ToLower(used.ShortCode)},
		"code cancelled":        {ShortCode: cancelled.ShortCode},
		"code expired":          {ShortCode: expiring.ShortCode},
		"code expired, swept":   {ShortCode: swept.ShortCode},
		"token never issued":    {BindingToken: "1111111111111111111111"},
		"token used":            {BindingToken: used.BindingToken},
		"token cancelled":       {BindingToken: cancelled.BindingToken},
		"token expired":         {BindingToken: expiring.BindingToken},
		"code too long":         {ShortCode: strings.Repeat("A", 300)},
		"code with odd symbols": {ShortCode: "IO01L!?*"},
	}
	type answer struct {
		status int
		header string
		body   []byte
	}
	answers := map[string]answer{}
	for name, req := range cases {
		resp := w.rawResolve(t, req, w.token)
		answers[name] = resp
	}
	want := answers["code never issued"]
	if want.status != http.StatusNotFound || string(want.body) != `{"code":"NOT_FOUND","error":"binding code not found"}`+"\n" {
		t.Fatalf("never-issued code: %d %q", want.status, want.body)
	}
	for name, got := range answers {
		if got.status != want.status || got.header != want.header || !bytes.Equal(got.body, want.body) {
			t.Errorf("%s: %d %q %q, want %d %q %q", name, got.status, got.header, got.body, want.status, want.header, want.body)
		}
	}
}

// rawResolve sends a resolve and returns its status, the headers that describe the body and
// the body.
func (w *arena) rawResolve(t *testing.T, req api.ResolveRequest, token string) struct {
	status int
	header string
	body   []byte
} {
	t.Helper()
	hr, err := http.NewRequest("POST", w.srv.URL+"/v1/bindings/resolve", bytes.NewReader(mustJSON(t, req)))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("Authorization", "Bearer "+token)
	resp, body := testkit.Do(t, w.srv.Client(), hr)
	header := fmt.Sprintf("%s|%s|%v", resp.Header.Get("Content-Type"), resp.Header.Get("Content-Length"), resp.Header.Values("Set-Cookie"))
	return struct {
		status int
		header string
		body   []byte
	}{resp.StatusCode, header, body}
}

// scriptedRand is a random source whose next bytes a test may choose; otherwise it reads
// crypto/rand.
type scriptedRand struct {
	mu   sync.Mutex
	next []byte
}

func (s *scriptedRand) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.next) == 0 {
		return rand.Read(p)
	}
	n := copy(p, s.next)
	s.next = s.next[n:]
	if n < len(p) {
		m, err := rand.Read(p[n:])
		return n + m, err
	}
	return n, nil
}

// script makes the next short code drawn be code: each symbol is drawn from one byte, its
// index in the alphabet.
func (s *scriptedRand) script(code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next = nil
	for i := 0; i < len(code); i++ {
		s.next = append(s.next, byte(strings.IndexByte(binding.ShortCodeAlphabet, code[i])))
	}
	// The rest of the read that drew the code is thrown away; pad it so the token that
	// follows comes from crypto/rand.
	for len(s.next)%16 != 0 {
		s.next = append(s.next, 0)
	}
}

// TestEnumerationPerCodeLimit: five failures on one code within ten minutes block it, valid
// or not: the code that a session then gets is RATE_LIMITED until the window from the first
// failure has passed, and then it resolves.
func TestEnumerationPerCodeLimit(t *testing.T) {
	r := &scriptedRand{}
	w := newArena(t, func(c *registry.Config) { c.Rand = r })
	const code = "K7K7K7K7"
	for i := range binding.ResolveFailureLimit {
		w.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: code}, w.token, http.StatusNotFound, "NOT_FOUND")
		if i == 0 {
			w.clock.Advance(4 * time.Minute)
		}
	}
	r.script(code)
	ini := w.drive(w.n, w.op, w.token, "bs-1", "INITIATED").ini
	if ini.ShortCode != code {
		t.Fatalf("scripted code %s, got %s", code, ini.ShortCode)
	}
	// Every spelling of the code is the same code, so the same counter.
	for _, spelled := range []string{code, strings.ToLower(code), "k7k7-k7k7", "K7K7 K7K7"} {
		before := hostileSnapshot(t, w.st)
		w.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: spelled}, w.token, http.StatusTooManyRequests, "RATE_LIMITED")
		hostileSameStore(t, "a blocked resolve", before, hostileSnapshot(t, w.st))
	}
	w.clock.Advance(6*time.Minute + time.Second)
	var v api.ResolveView
	w.ok("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: code}, w.token, &v)
	if v.BindingSessionID != "bs-1" {
		t.Fatalf("resolve after the window: %+v", v)
	}
	if c := hostileSnapshot(t, w.st).Counters; c["resolve-code/"+hashHex(code)].Count != 0 {
		t.Fatalf("a success must clear the code's counter: %+v", c)
	}
}

func hashHex(code string) string {
	h := binding.HashSecret(binding.NormalizeCode(code))
	return hex.EncodeToString(h[:])
}

// TestEnumerationPerAddressLimit: once one address has failed as often as its limit
// allows, every resolve from it is RATE_LIMITED, a valid code too, until its window passes;
// another address is not affected.
func TestEnumerationPerAddressLimit(t *testing.T) {
	w := newArena(t, resolveAddressLimit(3))
	ini := w.drive(w.n, w.op, w.token, "bs-1", "INITIATED").ini
	for i := range 3 {
		w.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: fmt.Sprintf("ZZZZZZZ%d", i+2)}, w.token, http.StatusNotFound, "NOT_FOUND")
	}
	valid := api.ResolveRequest{ShortCode: ini.ShortCode}
	blocked := w.fails("POST", "/v1/bindings/resolve", valid, w.token, http.StatusTooManyRequests, "RATE_LIMITED")
	other := w.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: "YYYYYYYY"}, w.token, http.StatusTooManyRequests, "RATE_LIMITED")
	if !bytes.Equal(blocked, other) {
		t.Fatalf("a blocked valid code and a blocked unknown one differ: %s / %s", blocked, other)
	}
	// Another address resolves the same valid code.
	v, err := w.svc.Resolve(context.Background(), authn.Operator{DID: w.op.did}, valid, "192.0.2.77")
	if err != nil || v.BindingSessionID != "bs-1" {
		t.Fatalf("another address: %+v %v", v, err)
	}
	w.clock.Advance(binding.ResolveWindow)
	w.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: "ZZZZZZZ2"}, w.token, http.StatusNotFound, "NOT_FOUND")
}

// recordingStore logs every store call a request makes, with its arguments, so a test can
// compare what two requests asked of the store.
type recordingStore struct {
	store.Store
	mu    sync.Mutex
	calls []string
}

func (r *recordingStore) record(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fmt.Sprintf(format, args...))
}

func (r *recordingStore) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

func (r *recordingStore) View(ctx context.Context, fn func(store.Tx) error) error {
	r.record("View")
	return r.Store.View(ctx, func(tx store.Tx) error { return fn(recordingTx{tx, r}) })
}

func (r *recordingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	r.record("Update")
	return r.Store.Update(ctx, func(tx store.Tx) error { return fn(recordingTx{tx, r}) })
}

type recordingTx struct {
	tx store.Tx
	r  *recordingStore
}

func (t recordingTx) Node(k didkey.PublicKey) (store.Node, error) {
	t.r.record("Node(%s)", k.Hex())
	return t.tx.Node(k)
}
func (t recordingTx) PutNode(n store.Node) error {
	t.r.record("PutNode(%+v)", n)
	return t.tx.PutNode(n)
}
func (t recordingTx) NodeKeyByDID(did string) (didkey.PublicKey, error) {
	t.r.record("NodeKeyByDID(%q)", did)
	return t.tx.NodeKeyByDID(did)
}
func (t recordingTx) NodeKeysByShortBody(body string) ([]didkey.PublicKey, error) {
	t.r.record("NodeKeysByShortBody(%q)", body)
	return t.tx.NodeKeysByShortBody(body)
}
func (t recordingTx) EachNode(fn func(store.Node) error) error {
	t.r.record("EachNode")
	return t.tx.EachNode(fn)
}
func (t recordingTx) NodeCount() (int, error) {
	t.r.record("NodeCount")
	return t.tx.NodeCount()
}
func (t recordingTx) DeleteNode(k didkey.PublicKey) error {
	t.r.record("DeleteNode(%s)", k.Hex())
	return t.tx.DeleteNode(k)
}
func (t recordingTx) BindingSession(id string) (binding.BindingSession, error) {
	t.r.record("BindingSession(%q)", id)
	return t.tx.BindingSession(id)
}
func (t recordingTx) PutBindingSession(s binding.BindingSession) error {
	t.r.record("PutBindingSession(%+v)", s)
	return t.tx.PutBindingSession(s)
}
func (t recordingTx) DeleteBindingSession(id string) error {
	t.r.record("DeleteBindingSession(%q)", id)
	return t.tx.DeleteBindingSession(id)
}
func (t recordingTx) BindingSessionIDUsed(id string) (bool, error) {
	t.r.record("BindingSessionIDUsed(%q)", id)
	return t.tx.BindingSessionIDUsed(id)
}
func (t recordingTx) BindingSessionIDBySecret(h [32]byte) (string, error) {
	t.r.record("BindingSessionIDBySecret(%x)", h)
	return t.tx.BindingSessionIDBySecret(h)
}
func (t recordingTx) OpenBindingSessionsByNode(k didkey.PublicKey) ([]binding.BindingSession, error) {
	t.r.record("OpenBindingSessionsByNode(%s)", k.Hex())
	return t.tx.OpenBindingSessionsByNode(k)
}
func (t recordingTx) EachBindingSession(fn func(binding.BindingSession) error) error {
	t.r.record("EachBindingSession")
	return t.tx.EachBindingSession(fn)
}
func (t recordingTx) Binding(k didkey.PublicKey) (binding.Binding, error) {
	t.r.record("Binding(%s)", k.Hex())
	return t.tx.Binding(k)
}
func (t recordingTx) PutBinding(b binding.Binding) error {
	t.r.record("PutBinding(%+v)", b)
	return t.tx.PutBinding(b)
}
func (t recordingTx) BindingsByOperator(op string) ([]binding.Binding, error) {
	t.r.record("BindingsByOperator(%q)", op)
	return t.tx.BindingsByOperator(op)
}
func (t recordingTx) DeleteBinding(k didkey.PublicKey) error {
	t.r.record("DeleteBinding(%s)", k.Hex())
	return t.tx.DeleteBinding(k)
}
func (t recordingTx) Revocation(op, id string) (store.Revocation, error) {
	t.r.record("Revocation(%q, %q)", op, id)
	return t.tx.Revocation(op, id)
}
func (t recordingTx) PutRevocation(r store.Revocation) error {
	t.r.record("PutRevocation(%+v)", r)
	return t.tx.PutRevocation(r)
}
func (t recordingTx) RevocationCount() (int, error) {
	t.r.record("RevocationCount")
	return t.tx.RevocationCount()
}
func (t recordingTx) DeleteRevocation(did, id string) error {
	t.r.record("DeleteRevocation(%q, %q)", did, id)
	return t.tx.DeleteRevocation(did, id)
}
func (t recordingTx) EachRevocation(fn func(store.Revocation) error) error {
	t.r.record("EachRevocation")
	return t.tx.EachRevocation(fn)
}
func (t recordingTx) EachOperatorPin(fn func(store.OperatorPin) error) error {
	t.r.record("EachOperatorPin")
	return t.tx.EachOperatorPin(fn)
}
func (t recordingTx) OperatorPin(body string) (store.OperatorPin, error) {
	t.r.record("OperatorPin(%q)", body)
	return t.tx.OperatorPin(body)
}
func (t recordingTx) PutOperatorPin(p store.OperatorPin) error {
	t.r.record("PutOperatorPin(%+v)", p)
	return t.tx.PutOperatorPin(p)
}
func (t recordingTx) BearerSession(h [32]byte) (authn.BearerSession, error) {
	t.r.record("BearerSession(%x)", h)
	return t.tx.BearerSession(h)
}
func (t recordingTx) PutBearerSession(h [32]byte, s authn.BearerSession) error {
	t.r.record("PutBearerSession(%x, %+v)", h, s)
	return t.tx.PutBearerSession(h, s)
}
func (t recordingTx) DeleteBearerSession(h [32]byte) error {
	t.r.record("DeleteBearerSession(%x)", h)
	return t.tx.DeleteBearerSession(h)
}
func (t recordingTx) BearerSessionsOf(op string) ([][32]byte, error) {
	t.r.record("BearerSessionsOf(%q)", op)
	return t.tx.BearerSessionsOf(op)
}
func (t recordingTx) EachBearerSession(fn func([32]byte, authn.BearerSession) error) error {
	t.r.record("EachBearerSession")
	return t.tx.EachBearerSession(fn)
}
func (t recordingTx) Counter(k string) (store.Counter, error) {
	t.r.record("Counter(%q)", k)
	return t.tx.Counter(k)
}
func (t recordingTx) Counters(ks ...string) ([]store.Counter, error) {
	t.r.record("Counters(%q)", ks)
	return t.tx.Counters(ks...)
}
func (t recordingTx) CountEvent(k string, now time.Time, window time.Duration) (store.Counter, error) {
	t.r.record("CountEvent(%q, %v, %v)", k, now, window)
	return t.tx.CountEvent(k, now, window)
}
func (t recordingTx) PutCounter(k string, c store.Counter) error {
	t.r.record("PutCounter(%q, %+v)", k, c)
	return t.tx.PutCounter(k, c)
}
func (t recordingTx) DeleteCounter(k string) error {
	t.r.record("DeleteCounter(%q)", k)
	return t.tx.DeleteCounter(k)
}
func (t recordingTx) EachBinding(fn func(binding.Binding) error) error {
	t.r.record("EachBinding")
	return t.tx.EachBinding(fn)
}
func (t recordingTx) EachCounter(fn func(string, store.Counter) error) error {
	t.r.record("EachCounter")
	return t.tx.EachCounter(fn)
}

// callKinds is the method name of each recorded call.
func callKinds(calls []string) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i], _, _ = strings.Cut(c, "(")
	}
	return out
}

// TestEnumerationSameStoreCalls proves without timing that a failed resolve takes the same
// path whether or not its code ever existed: the store calls of a resolve of a code that
// was used and of a code never issued are the same methods in the same order, the code is
// looked up only by its hash, and no spelling of the code or token reaches the store.
func TestEnumerationSameStoreCalls(t *testing.T) {
	rec := &recordingStore{}
	w := newArenaOver(t, func(st store.Store) store.Store { rec.Store = st; return rec })
	used := w.drive(w.n, w.op, w.token, "bs-used", "INITIATED").ini
	w.ok("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: used.ShortCode}, w.token, nil)
	expired := w.drive(w.n, w.op, w.token, "bs-expired", "INITIATED").ini
	w.clock.Advance(11 * time.Minute)
	fresh := w.drive(w.n, w.op, w.token, "bs-fresh", "INITIATED").ini

	resolve := func(req api.ResolveRequest) []string {
		rec.take()
		w.request("POST", "/v1/bindings/resolve", mustJSON(t, req), "Bearer "+w.token)
		return rec.take()
	}
	never := "ZZZZZZZZ"
	paths := map[string][]string{
		"used code":          resolve(api.ResolveRequest{ShortCode: used.ShortCode}),
		"expired code":       resolve(api.ResolveRequest{ShortCode: strings.ToLower(expired.ShortCode)}),
		"never-issued code":  resolve(api.ResolveRequest{ShortCode: never}),
		"used token":         resolve(api.ResolveRequest{BindingToken: used.BindingToken}),
		"never-issued token": resolve(api.ResolveRequest{BindingToken: "1111111111111111111111"}),
	}
	want := callKinds(paths["never-issued code"])
	t.Logf("store calls of a failed resolve: %v", want)
	for name, calls := range paths {
		if got := callKinds(calls); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: store calls %v, want the never-issued code's %v", name, got, want)
		}
	}
	// The lookup is by the hash of the normalised code.
	h0 := binding.HashSecret(binding.NormalizeCode(used.ShortCode))
	lookup := fmt.Sprintf("BindingSessionIDBySecret(%x)", h0)
	found := false
	for _, c := range paths["used code"] {
		found = found || c == lookup
	}
	if !found {
		t.Errorf("a used code was not looked up as %s: %v", lookup, paths["used code"])
	}
	// No spelling of any presented secret reaches the store. The successful resolve of a
	// fresh code is included: its calls must not carry the code either.
	paths["fresh code"] = resolve(api.ResolveRequest{ShortCode: fresh.ShortCode[:4] + "-" + strings.ToLower(fresh.ShortCode[4:])})
	for _, code := range []api.InitiateResult{used, expired, fresh} {
		secrets := []string{code.ShortCode, strings.ToLower(code.ShortCode), code.ShortCode[:4] + "-" + code.ShortCode[4:], code.BindingToken}
		for name, calls := range paths {
			for _, c := range calls {
				for _, s := range secrets {
					if strings.Contains(c, s) {
						t.Errorf("%s: a store call carries a secret: %s", name, c)
					}
				}
			}
		}
	}
	for name, calls := range paths {
		for _, c := range calls {
			if strings.Contains(c, never) {
				t.Errorf("%s: a store call carries the presented code: %s", name, c)
			}
		}
	}
}

// TestEnumerationNoSecretComparison reads the registry's source: no short code, binding
// token or their hashes is compared with == or != (other than with ""), so finding a
// session by its secret is the store's hash lookup and nothing else.
func TestEnumerationNoSecretComparison(t *testing.T) {
	secret := map[string]bool{"ShortCode": true, "BindingToken": true, "CodeHash": true, "TokenHash": true}
	fset := token.NewFileSet()
	checked := 0
	for _, f := range parseSources(t, fset, ".") {
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			be, ok := n.(*ast.BinaryExpr)
			if !ok || (be.Op != token.EQL && be.Op != token.NEQ) {
				return true
			}
			for _, side := range [][2]ast.Expr{{be.X, be.Y}, {be.Y, be.X}} {
				sel, ok := side[0].(*ast.SelectorExpr)
				if !ok || !secret[sel.Sel.Name] {
					continue
				}
				if lit, ok := side[1].(*ast.BasicLit); ok && lit.Value == `""` {
					continue
				}
				t.Errorf("%s: %s is compared with %s", fset.Position(be.Pos()), sel.Sel.Name, be.Op)
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no source files read")
	}
}

func (t recordingTx) ConsumeChallenge(id []byte, expires time.Time) error {
	t.r.record("ConsumeChallenge")
	return t.tx.ConsumeChallenge(id, expires)
}

func (t recordingTx) PutNodeRevision(n store.Node) (uint64, error) {
	t.r.record("PutNodeRevision(%+v)", n)
	return t.tx.PutNodeRevision(n)
}

func (t recordingTx) WriteTouchedNode(n store.Node) error {
	t.r.record("WriteTouchedNode(%+v)", n)
	return t.tx.WriteTouchedNode(n)
}
func (t recordingTx) LogSize() (int64, error) {
	t.r.record("LogSize")
	return t.tx.LogSize()
}
func (t recordingTx) LogEntries(start, end int64) ([][]byte, error) {
	t.r.record("LogEntries(%d, %d)", start, end)
	return t.tx.LogEntries(start, end)
}
func (t recordingTx) LogHashes(indexes []int64) ([]tlog.Hash, error) {
	t.r.record("LogHashes(%v)", indexes)
	return t.tx.LogHashes(indexes)
}
func (t recordingTx) AppendLog(index int64, entry []byte, hashes []tlog.Hash) error {
	t.r.record("AppendLog(%d, %q)", index, entry)
	return t.tx.AppendLog(index, entry, hashes)
}
func (t recordingTx) LogSeed() ([32]byte, error) {
	t.r.record("LogSeed")
	return t.tx.LogSeed()
}
func (t recordingTx) PutLogSeed(seed [32]byte) error {
	t.r.record("PutLogSeed")
	return t.tx.PutLogSeed(seed)
}
