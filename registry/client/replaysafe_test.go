package client_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/client"
)

type connRequests struct{}

// TestReplaySafeOnClosedKeepAlive: a registry that closes an idle keep-alive connection as the
// client reuses it (as a daemon at its connection cap does) costs a heartbeat or a
// registration nothing: the transport sends it again on a new connection. A request that is
// not replay-safe (a challenge, single-use) is not sent twice, and fails.
func TestReplaySafeOnClosedKeepAlive(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The second request of every connection finds it closed, unanswered.
		if r.Context().Value(connRequests{}).(*atomic.Int32).Add(1) == 2 {
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	}))
	srv.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, connRequests{}, new(atomic.Int32))
	}
	srv.Start()
	defer srv.Close()
	c, err := client.New(srv.URL, client.WithRetry(client.RetryPolicy{}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 2 {
		if _, err := c.Heartbeat(ctx, api.HeartbeatRequest{}); err != nil {
			t.Fatalf("heartbeat %d: %v", i+1, err)
		}
	}
	for i := range 2 {
		if _, err := c.Register(ctx, api.RegisterRequest{}); err != nil {
			t.Fatalf("registration %d: %v", i+1, err)
		}
	}
	// Each request sent again took a new connection, so the challenge is the second request
	// of the last one.
	if _, err := c.Challenge(ctx); client.CodeOf(err) != "TRANSPORT_ERROR" {
		t.Fatalf("a challenge on the closed connection: %v; want TRANSPORT_ERROR, not sent again", err)
	}
}
