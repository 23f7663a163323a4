package client_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log"
	"net/http/httptest"
	"time"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/client"
	"github.com/svrp/svrp/registry/httpapi"
	"github.com/svrp/svrp/store"
)

// exampleRegistry starts an in-memory registry for the examples; a real caller passes the
// URL of a running svrpd instead.
func exampleRegistry() *httptest.Server {
	svc, err := registry.New(registry.Config{Store: store.NewMemory()})
	if err != nil {
		log.Fatal(err)
	}
	return httptest.NewServer(httpapi.New(svc))
}

// exampleKey returns a fixed key, so the examples are repeatable; a real caller uses
// ed25519.GenerateKey(nil) once and keeps the seed secret.
func exampleKey(b byte) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = b
	}
	return ed25519.NewKeyFromSeed(seed)
}

// A node announces itself with a signed registration, then keeps its last_seen fresh with
// heartbeats.
func ExampleNode_Register() {
	srv := exampleRegistry()
	defer srv.Close()
	ctx := context.Background()

	c, err := client.New(srv.URL)
	if err != nil {
		log.Fatal(err)
	}
	node, err := client.NewNode(c, exampleKey(1), didkey.FormShort)
	if err != nil {
		log.Fatal(err)
	}
	reg, err := node.Register(ctx, "203.0.113.7:7000", []string{"inference"}, "eu")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("registered:", reg.Registered, "signed:", reg.Signed)

	if _, err := node.Heartbeat(ctx); err != nil {
		log.Fatal(err)
	}
	online, err := c.OnlineNodes(ctx, 0) // 0: the default 10-minute window
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("online nodes:", len(online), online[0].DID == node.DID)
	// Output:
	// registered: true signed: true
	// online nodes: 1 true
}

// An operator issues a device credential offline with the root key, then logs in with the
// device key. The session token is a secret; the examples print only that one was issued.
func ExampleClient_Login() {
	srv := exampleRegistry()
	defer srv.Close()
	ctx := context.Background()

	root, device := exampleKey(2), exampleKey(3)
	cred, err := client.IssueDeviceCredential(root, device.Public().(ed25519.PublicKey), client.CredentialOptions{})
	if err != nil {
		log.Fatal(err)
	}

	c, err := client.New(srv.URL)
	if err != nil {
		log.Fatal(err)
	}
	op, err := c.Login(ctx, device, cred)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("logged in:", op.DID == cred.OperatorDID, op.Token != "")

	_, err = op.Balance(ctx)
	var nyw *client.NotYetWiredError
	if errors.As(err, &nyw) {
		fmt.Println(client.CodeOf(err), nyw.Level, nyw.Envelope.Unit)
	}
	// Output:
	// logged in: true true
	// NOT_YET_WIRED not_yet_wired test-credit
}

// The whole binding: the node asks, the operator resolves the short code, compares the
// fingerprint and authorizes, and the node accepts the exact authorization it received.
func Example_binding() {
	srv := exampleRegistry()
	defer srv.Close()
	ctx := context.Background()

	// The node's machine.
	nc, _ := client.New(srv.URL)
	node, _ := client.NewNode(nc, exampleKey(4), didkey.FormShort)
	if _, err := node.Register(ctx, "198.51.100.9:7000", []string{"inference"}, ""); err != nil {
		log.Fatal(err)
	}
	single, daily := 10.0, 100.0
	session, err := node.Initiate(ctx, client.InitiateOptions{
		DeviceSummary: "rack 4, slot 2", OS: "linux",
		TaskTypes: []string{"inference"}, SingleLimit: &single, DailyLimit: &daily,
		TTL: 10 * time.Minute,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("node:", session.State)
	code, did, fingerprint := session.ShortCode, node.DID, node.PublicKey().Fingerprint() // shown on the node's screen

	// The operator's machine.
	root, device := exampleKey(5), exampleKey(6)
	cred, _ := client.IssueDeviceCredential(root, device.Public().(ed25519.PublicKey), client.CredentialOptions{})
	oc, _ := client.New(srv.URL)
	op, err := oc.Login(ctx, device, cred)
	if err != nil {
		log.Fatal(err)
	}
	view, err := op.ResolveNode(ctx, did, code)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("operator:", view.State, "fingerprint matches:", view.NodePublicKeyFingerprint == fingerprint)
	granted, err := op.Authorize(ctx, view, client.Requested(view))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("operator:", granted.State)

	// The node again.
	pending, err := node.WaitForAuthorization(ctx, session.BindingSessionID, time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("node: authorized by the operator:", pending.OperatorDID == op.DID)
	accepted, err := node.Accept(ctx, pending)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("node:", accepted.State)

	bound, err := op.Nodes(ctx, 0)
	if err != nil {
		log.Fatal(err)
	}
	n := bound.Nodes[0]
	fmt.Println("operator: bound nodes:", bound.Count, "online:", n.Online,
		"limits:", *n.Authorization.SingleLimit, *n.Authorization.DailyLimit)
	// Output:
	// node: INITIATED
	// operator: PENDING_OPERATOR fingerprint matches: true
	// operator: PENDING_NODE_ACCEPTANCE
	// node: authorized by the operator: true
	// node: ACTIVE
	// operator: bound nodes: 1 online: true limits: 10 100
}
