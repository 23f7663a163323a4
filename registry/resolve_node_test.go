package registry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/svrp/svrp/registry/budget"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/store"
)

// The rules of a resolve that names its node (docs/protocol.md §10.9).

func resolveGlobalLimit(n int) harnessOption {
	return func(c *registry.Config) { c.Limits.ResolveGlobalLimit = n }
}

func resolveOperatorLimit(n int) harnessOption {
	return func(c *registry.Config) { c.Limits.ResolveOperatorLimit = n }
}

// didOf spells n's key in form f.
func didOf(n node, f didkey.Form) string {
	d, _ := didkey.NodeDID(n.key, f)
	return d.String()
}

// TestResolveNamingNode: a resolve naming the node of the code, in any spelling, finds its
// session; naming another node answers the very bytes of an unknown code and changes
// nothing; a node_did that is no node DID gets the codes of §2 and counts no failure.
func TestResolveNamingNode(t *testing.T) {
	f := newResolveFixture(t)
	h, n, other := f.h, f.n, newNode(t, "other")
	_, unknown := h.do("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: "ZZZZ2222"}, f.token)
	opDID, _ := didkey.OperatorDID(n.key, didkey.FormShort)

	cases := []struct {
		name   string
		req    func(ini api.InitiateResult) api.ResolveRequest
		status int
		code   string // "" for a success
	}{
		{"short DID", func(i api.InitiateResult) api.ResolveRequest {
			return api.ResolveRequest{ShortCode: i.ShortCode, NodeDID: didOf(n, didkey.FormShort)}
		}, http.StatusOK, ""},
		{"fallback DID", func(i api.InitiateResult) api.ResolveRequest {
			return api.ResolveRequest{ShortCode: i.ShortCode, NodeDID: didOf(n, didkey.FormFallback)}
		}, http.StatusOK, ""},
		{"full DID", func(i api.InitiateResult) api.ResolveRequest {
			return api.ResolveRequest{ShortCode: i.ShortCode, NodeDID: didOf(n, didkey.FormFull)}
		}, http.StatusOK, ""},
		{"token and DID", func(i api.InitiateResult) api.ResolveRequest {
			return api.ResolveRequest{BindingToken: i.BindingToken, NodeDID: n.did}
		}, http.StatusOK, ""},
		{"another node's short DID", func(i api.InitiateResult) api.ResolveRequest {
			return api.ResolveRequest{ShortCode: i.ShortCode, NodeDID: other.did}
		}, http.StatusNotFound, "NOT_FOUND"},
		{"another node's full DID with the token", func(i api.InitiateResult) api.ResolveRequest {
			return api.ResolveRequest{BindingToken: i.BindingToken, NodeDID: other.fullDID()}
		}, http.StatusNotFound, "NOT_FOUND"},
		{"not a DID", func(i api.InitiateResult) api.ResolveRequest {
			return api.ResolveRequest{ShortCode: i.ShortCode, NodeDID: "node-1"}
		}, http.StatusUnauthorized, "ID_BINDING_REQUIRED"},
		{"bad grammar", func(i api.InitiateResult) api.ResolveRequest {
			return api.ResolveRequest{ShortCode: i.ShortCode, NodeDID: "did:svrp:n:ABCDEF12"}
		}, http.StatusUnauthorized, "ID_BINDING_FAILED"},
		{"an operator DID", func(i api.InitiateResult) api.ResolveRequest {
			return api.ResolveRequest{ShortCode: i.ShortCode, NodeDID: opDID.String()}
		}, http.StatusUnauthorized, "ID_BINDING_FAILED"},
	}
	for i, c := range cases {
		id := fmt.Sprintf("bs-named-%d", i)
		var ini api.InitiateResult
		h.ok("POST", "/v1/bindings/initiate", n.initiate(t, id, h.now(), nil, nil), "", &ini)
		status, raw := h.do("POST", "/v1/bindings/resolve", c.req(ini), f.token)
		if status != c.status {
			t.Fatalf("%s: status %d %s; want %d %s", c.name, status, raw, c.status, c.code)
		}
		switch {
		case c.code == "":
			var v api.ResolveView
			if err := json.Unmarshal(raw, &v); err != nil || v.BindingSessionID != id || v.NodePublicKey != n.key.Base58() {
				t.Fatalf("%s: resolved %s, %v; want session %s of the named node", c.name, raw, err, id)
			}
			h.wantState(id, "PENDING_OPERATOR")
			continue
		case c.code == "NOT_FOUND" && !bytes.Equal(raw, unknown):
			t.Fatalf("%s: answers %q; an unknown code %q", c.name, raw, unknown)
		case c.code != "NOT_FOUND" && !bytes.Contains(raw, []byte(`"code":"`+c.code+`"`)):
			t.Fatalf("%s: answer %s; want %s", c.name, raw, c.code)
		}
		h.wantState(id, "INITIATED")
		// The right node still resolves it: one failure of the code is below its limit.
		h.ok("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: ini.ShortCode, NodeDID: n.did}, f.token, nil)
	}
}

// resolver sends resolves straight to the service from any client address, as an operator
// whose bearer token it holds.
type resolver struct {
	t  *testing.T
	h  *harness
	op authn.Operator
}

func (h *harness) resolver(t *testing.T, token string) resolver {
	op, err := h.svc.Authenticate(context.Background(), "Bearer "+token)
	if err != nil {
		t.Fatal(err)
	}
	return resolver{t: t, h: h, op: op}
}

// try returns the code of the answer ("" for a success) and the limit that refused it.
func (r resolver) try(addr string, req api.ResolveRequest) (proto.Code, string) {
	r.t.Helper()
	_, err := r.h.svc.Resolve(context.Background(), r.op, req, addr)
	if err == nil {
		return "", ""
	}
	return proto.CodeOf(err), budget.LimitOf(err)
}

func (r resolver) want(addr string, req api.ResolveRequest, code proto.Code, limit string) {
	r.t.Helper()
	if got, gotLimit := r.try(addr, req); got != code || gotLimit != limit {
		r.t.Fatalf("resolve from %s naming %q: %q (limit %q); want %q (limit %q)", addr, req.NodeDID, got, gotLimit, code, limit)
	}
}

func stranger(i int) string { return fmt.Sprintf("198.51.100.%d", i) }

// TestResolveNodeBudget: past ResolveNodeFailureLimit failures naming a node, resolves naming
// it are refused from the addresses that failed on it, and only from them; a stranger's first
// try from a fresh address is a failure like any other; the operator with the right code,
// from an address that did not fail, resolves throughout; other nodes are not touched; and
// the budget ends with its window.
func TestResolveNodeBudget(t *testing.T) {
	f := newResolveFixture(t, resolveOperatorLimit(1000))
	h, n := f.h, f.n
	var ini api.InitiateResult
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, "bs-target", h.now(), nil, nil), "", &ini)
	mallory := h.resolver(t, newOperator(t, "mallory", h.now(), "nodes.bind").login(h))
	honest := h.resolver(t, f.token)
	guess := func(i int, did string) api.ResolveRequest {
		return api.ResolveRequest{ShortCode: fmt.Sprintf("ZZZ%05d", i)[:8], NodeDID: did}
	}

	// Spelled three ways, the failures count against one key.
	spellings := []string{n.did, didOf(n, didkey.FormFallback), n.fullDID(), n.did, n.did}
	for i := range binding.ResolveNodeFailureLimit {
		mallory.want(stranger(1+i%2), guess(i, spellings[i]), proto.NotFound, "")
	}
	steps := []struct {
		name  string
		addr  string
		req   api.ResolveRequest
		code  proto.Code
		limit string
	}{
		{"an address that failed, another code", stranger(1), guess(100, n.did), proto.RateLimited, budget.LimitResolvePerNode},
		{"the other address that failed, full DID", stranger(2), guess(101, n.fullDID()), proto.RateLimited, budget.LimitResolvePerNode},
		{"an address that failed, the right code", stranger(1), api.ResolveRequest{ShortCode: ini.ShortCode, NodeDID: n.did}, proto.RateLimited, budget.LimitResolvePerNode},
		{"a fresh stranger's first try", stranger(3), guess(102, n.did), proto.NotFound, ""},
		{"that stranger again", stranger(3), guess(103, n.did), proto.RateLimited, budget.LimitResolvePerNode},
		{"a failed address naming another node", stranger(1), guess(104, newNode(t, "elsewhere").did), proto.NotFound, ""},
		{"a failed address without node_did", stranger(1), api.ResolveRequest{ShortCode: "ZZZZZZZZ"}, proto.NotFound, ""},
		{"the operator from a clean address", "192.0.2.10", api.ResolveRequest{ShortCode: ini.ShortCode, NodeDID: n.did}, "", ""},
	}
	for _, s := range steps {
		r := mallory
		if s.addr == "192.0.2.10" {
			r = honest
		}
		if got, limit := r.try(s.addr, s.req); got != s.code || limit != s.limit {
			t.Fatalf("%s: %q (limit %q); want %q (limit %q)", s.name, got, limit, s.code, s.limit)
		}
	}
	h.wantState("bs-target", "PENDING_OPERATOR")

	// The window ends: the addresses that failed may try again.
	h.clock.Advance(binding.ResolveWindow)
	mallory.want(stranger(1), guess(200, n.did), proto.NotFound, "")
}

// TestResolveNamedGlobalBudget: failures of resolves naming a node neither count toward the
// global budget nor are refused by it, while resolves without node_did keep every rule of
// §5.4: they count toward it and are refused past it, a real code included.
func TestResolveNamedGlobalBudget(t *testing.T) {
	const global = 4
	f := newResolveFixture(t, resolveGlobalLimit(global), resolveOperatorLimit(1000))
	h, n := f.h, f.n
	mallory := h.resolver(t, newOperator(t, "mallory", h.now(), "nodes.bind").login(h))
	honest := h.resolver(t, f.token)
	var first, second api.InitiateResult
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, "bs-1", h.now(), nil, nil), "", &first)
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, "bs-2", h.now(), nil, nil), "", &second)

	// Many named failures, each on its own node and address: none is refused by, or spends,
	// the global budget.
	for i := range 3 * global {
		victim := newNode(t, fmt.Sprint("victim-", i))
		mallory.want(stranger(i), api.ResolveRequest{ShortCode: fmt.Sprintf("YYYY%04d", i), NodeDID: victim.did}, proto.NotFound, "")
	}
	for i := range global {
		mallory.want(stranger(100+i), api.ResolveRequest{ShortCode: fmt.Sprintf("XXXX%04d", i)}, proto.NotFound, "")
	}
	// Now the global budget is spent, by unnamed failures alone.
	mallory.want(stranger(200), api.ResolveRequest{ShortCode: "WWWWWWWW"}, proto.RateLimited, budget.LimitResolveGlobal)
	honest.want("192.0.2.10", api.ResolveRequest{ShortCode: first.ShortCode}, proto.RateLimited, budget.LimitResolveGlobal)
	mallory.want(stranger(201), api.ResolveRequest{ShortCode: "WWWWWWWW", NodeDID: n.did}, proto.NotFound, "")
	honest.want("192.0.2.10", api.ResolveRequest{ShortCode: first.ShortCode, NodeDID: n.did}, "", "")
	honest.want("192.0.2.11", api.ResolveRequest{BindingToken: second.BindingToken, NodeDID: n.fullDID()}, "", "")
}

// TestResolveNamedPerCode: the per-code rule of §5.4 holds for resolves naming a node: five
// failures presenting one code — here the right code naming other nodes, from five addresses,
// so that no other budget speaks — make the sixth attempt RATE_LIMITED, right node or not.
func TestResolveNamedPerCode(t *testing.T) {
	f := newResolveFixture(t, resolveOperatorLimit(1000))
	h, n := f.h, f.n
	mallory := h.resolver(t, newOperator(t, "mallory", h.now(), "nodes.bind").login(h))
	var ini api.InitiateResult
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, "bs-1", h.now(), nil, nil), "", &ini)
	for i := range binding.ResolveFailureLimit {
		mallory.want(stranger(i), api.ResolveRequest{ShortCode: ini.ShortCode, NodeDID: newNode(t, fmt.Sprint("other-", i)).did}, proto.NotFound, "")
	}
	h.resolver(t, f.token).want("192.0.2.10", api.ResolveRequest{ShortCode: ini.ShortCode, NodeDID: n.did}, proto.RateLimited, budget.LimitResolvePerCode)
	h.wantState("bs-1", "INITIATED")
}

// TestResolveNamedAddressAndOperator: the per-address and per-operator budgets of §5.4 count
// and refuse resolves naming a node too: they refuse only the party that spent them.
func TestResolveNamedAddressAndOperator(t *testing.T) {
	f := newResolveFixture(t, resolveAddressLimit(3), resolveOperatorLimit(5))
	h := f.h
	mallory := h.resolver(t, newOperator(t, "mallory", h.now(), "nodes.bind").login(h))
	named := func(i int) api.ResolveRequest {
		return api.ResolveRequest{ShortCode: fmt.Sprintf("VVVV%04d", i), NodeDID: newNode(t, fmt.Sprint("n-", i)).did}
	}
	for i := range 3 {
		mallory.want(stranger(1), named(i), proto.NotFound, "")
	}
	mallory.want(stranger(1), named(3), proto.RateLimited, budget.LimitResolvePerAddress)
	mallory.want(stranger(2), named(4), proto.NotFound, "")
	mallory.want(stranger(2), named(5), proto.NotFound, "")
	mallory.want(stranger(3), named(6), proto.RateLimited, budget.LimitResolvePerOperator)
	var ini api.InitiateResult
	h.ok("POST", "/v1/bindings/initiate", f.n.initiate(t, "bs-1", h.now(), nil, nil), "", &ini)
	h.resolver(t, f.token).want(stranger(3), api.ResolveRequest{ShortCode: ini.ShortCode, NodeDID: f.n.did}, "", "")
}

// TestResolveNamedSameStoreCalls proves without timing that naming another node is not an
// oracle: a live code naming another node, a used code naming its own node and a code never
// issued naming the node take the same store calls in the same order, with the same counter
// keys but for the code's.
func TestResolveNamedSameStoreCalls(t *testing.T) {
	rec := &recordingStore{}
	w := newArenaOver(t, func(st store.Store) store.Store { rec.Store = st; return rec })
	live, used := w.drive(w.n, w.op, w.token, "bs-live", "INITIATED").ini, w.drive(w.n, w.op, w.token, "bs-used", "INITIATED").ini
	w.ok("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: used.ShortCode, NodeDID: w.n.did}, w.token, nil)
	other := newNode(t, "other")

	resolve := func(req api.ResolveRequest) []string {
		rec.take()
		w.fails("POST", "/v1/bindings/resolve", req, w.token, http.StatusNotFound, "NOT_FOUND")
		return rec.take()
	}
	paths := map[string][]string{
		"live code, another node": resolve(api.ResolveRequest{ShortCode: live.ShortCode, NodeDID: other.did}),
		"used code, its node":     resolve(api.ResolveRequest{ShortCode: used.ShortCode, NodeDID: w.n.did}),
		"never-issued code":       resolve(api.ResolveRequest{ShortCode: "ZZZZZZZZ", NodeDID: other.did}),
	}
	want := callKinds(paths["never-issued code"])
	for name, calls := range paths {
		if got := callKinds(calls); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: store calls %v, want the never-issued code's %v", name, got, want)
		}
		for _, c := range calls {
			if strings.Contains(c, "resolve-all") {
				t.Errorf("%s: a resolve naming a node touched the global budget: %s", name, c)
			}
		}
	}
	w.wantState("bs-live", "INITIATED")
}
