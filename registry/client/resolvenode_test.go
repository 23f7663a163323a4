package client_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/client"
)

// TestResolveNode: ResolveNode sends node_did; the named node's session resolves in every
// spelling of its DID, another node's DID gets the registry's NOT_FOUND, a DID that is no DID
// is refused before anything is sent, and a view of another node than the one named (from a
// registry that ignores node_did) is refused.
func TestResolveNode(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	nc, oc := w.client(), w.client()
	node, other := w.node(nc, "node"), w.node(nc, "other")
	op := w.operator(oc, "op")
	full, _ := didkey.NodeDID(node.PublicKey(), didkey.FormFull)

	var sent []string
	w.reqs.on("/v1/bindings/resolve", func(_ int, _ http.ResponseWriter, r *http.Request) bool {
		var req api.ResolveRequest
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &req)
		sent = append(sent, req.NodeDID)
		r.Body = io.NopCloser(bytes.NewReader(b))
		return false
	})

	cases := []struct {
		name  string
		did   string
		token bool
		code  proto.Code // "" for a success
	}{
		{"short DID", node.DID, false, ""},
		{"full DID, by token", full.String(), true, ""},
		{"another node's DID", other.DID, false, proto.NotFound},
		{"not a DID", "node-1", false, proto.IDBindingRequired},
	}
	for _, c := range cases {
		s, err := node.Initiate(ctx, client.InitiateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		before := len(sent)
		var v api.ResolveView
		if c.token {
			v, err = op.ResolveNodeToken(ctx, c.did, s.BindingToken)
		} else {
			v, err = op.ResolveNode(ctx, c.did, s.ShortCode)
		}
		if got := client.CodeOf(err); got != c.code {
			t.Fatalf("%s: err = %v, want code %q", c.name, err, c.code)
		}
		if c.code == "" && (v.BindingSessionID != s.BindingSessionID || v.NodeDID != node.DID) {
			t.Fatalf("%s: view %+v", c.name, v)
		}
		switch {
		case c.code == proto.IDBindingRequired && len(sent) != before:
			t.Fatalf("%s: sent a request for a DID that is no DID", c.name)
		case c.code != proto.IDBindingRequired && (len(sent) != before+1 || sent[before] != c.did):
			t.Fatalf("%s: sent node_did %q, want %q", c.name, sent[before:], c.did)
		}
	}

	// A registry that ignores node_did shows another node's request: refused.
	s, err := other.Initiate(ctx, client.InitiateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.reqs.on("/v1/bindings/resolve", func(_ int, _ http.ResponseWriter, r *http.Request) bool {
		b, _ := io.ReadAll(r.Body)
		var req map[string]any
		json.Unmarshal(b, &req)
		delete(req, "node_did")
		b, _ = json.Marshal(req)
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		return false
	})
	if _, err := op.ResolveNode(ctx, node.DID, s.ShortCode); client.CodeOf(err) != proto.IDBindingFailed {
		t.Fatalf("a view of another node: err = %v, want ID_BINDING_FAILED", err)
	}
}
