package client

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/registry/api"
)

// Health is the answer of GET /health.
type Health struct {
	Status  string `json:"status"`
	Service string `json:"service"`
	Count   int    `json:"count"`
}

// Health reports whether the registry is up and how many nodes it knows.
func (c *Client) Health(ctx context.Context) (Health, error) {
	var h Health
	err := c.call(ctx, request{method: http.MethodGet, path: "/health"}, &h)
	return h, err
}

// Rejected is a discovery record the client refused to return, and why.
type Rejected struct {
	// Record is the record as served. For GET /peers only DID, PublicKey (base58 there) and
	// Endpoint are filled; a line that does not even split into three fields has its text
	// in Endpoint.
	Record api.NodeView
	// Reason is the id-binding failure (ID_BINDING_REQUIRED or ID_BINDING_FAILED), or a
	// malformed line.
	Reason error
}

// Audit is a node table split into the records that passed id-binding and those that did
// not.
type Audit struct {
	Nodes    []api.NodeView
	Rejected []Rejected
}

// Nodes returns the node table (GET /nodes) under the filter, keeping only records whose DID
// derives from their key: a record that fails id-binding names an identity nobody can prove,
// so it is dropped. [Client.AuditNodes] shows what was dropped.
//
// The registry records what nodes claim; it does not vouch for endpoints or capabilities.
func (c *Client) Nodes(ctx context.Context, f api.NodeFilter) ([]api.NodeView, error) {
	a, err := c.AuditNodes(ctx, f)
	return a.Nodes, err
}

// AuditNodes is [Client.Nodes] that also returns the records it dropped, with the reason.
func (c *Client) AuditNodes(ctx context.Context, f api.NodeFilter) (Audit, error) {
	var env struct {
		Count int            `json:"count"`
		Nodes []api.NodeView `json:"nodes"`
	}
	if err := c.call(ctx, request{method: http.MethodGet, path: "/nodes", query: f.Query()}, &env); err != nil {
		return Audit{}, err
	}
	return audit(env.Nodes), nil
}

// APIPeers is [Client.Nodes] over the versioned GET /api/v1/peers.
func (c *Client) APIPeers(ctx context.Context, f api.NodeFilter) ([]api.NodeView, error) {
	var env struct {
		OK    bool           `json:"ok"`
		Data  []api.NodeView `json:"data"`
		Error *string        `json:"error"`
	}
	if err := c.call(ctx, request{method: http.MethodGet, path: "/api/v1/peers", query: f.Query()}, &env); err != nil {
		return nil, err
	}
	return audit(env.Data).Nodes, nil
}

func audit(records []api.NodeView) Audit {
	a := Audit{Nodes: []api.NodeView{}}
	for _, r := range records {
		if _, _, err := didkey.CheckNode(r.DID, r.PublicKey); err != nil {
			a.Rejected = append(a.Rejected, Rejected{Record: r, Reason: err})
			continue
		}
		a.Nodes = append(a.Nodes, r)
	}
	return a
}

// Peer is one line of GET /peers.
type Peer struct {
	DID       string
	PublicKey string // base58
	Endpoint  string
}

// Peers returns GET /peers (plain text, keys in base58), keeping only lines that split into
// DID, key and endpoint and pass id-binding.
func (c *Client) Peers(ctx context.Context, f api.NodeFilter) ([]Peer, []Rejected, error) {
	var text []byte
	req := request{method: http.MethodGet, path: "/peers", query: f.Query()}
	err := c.retrying(ctx, func() (err error) {
		text, err = c.once(ctx, req, nil)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	peers := []Peer{}
	var rejected []Rejected
	for _, line := range strings.Split(string(text), "\n") {
		if line == "" {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 3 {
			rejected = append(rejected, Rejected{
				Record: api.NodeView{Endpoint: line},
				Reason: fmt.Errorf("svrp client: /peers line has %d fields, want 3", len(fields)),
			})
			continue
		}
		p := Peer{DID: fields[0], PublicKey: fields[1], Endpoint: fields[2]}
		if _, _, err := didkey.CheckNode(p.DID, p.PublicKey); err != nil {
			rejected = append(rejected, Rejected{
				Record: api.NodeView{DID: p.DID, PublicKey: p.PublicKey, Endpoint: p.Endpoint},
				Reason: err,
			})
			continue
		}
		peers = append(peers, p)
	}
	return peers, rejected, nil
}

// OnlineNodes returns the id-bound nodes seen within window by the client's clock;
// window ≤ 0 means [DefaultOnlineWindow]. Registered does not mean online: last_seen is
// the only freshness signal.
func (c *Client) OnlineNodes(ctx context.Context, window time.Duration) ([]api.NodeView, error) {
	all, err := c.Nodes(ctx, api.NodeFilter{})
	if err != nil {
		return nil, err
	}
	now := c.now()
	online := []api.NodeView{}
	for _, n := range all {
		if Online(n, now, window) {
			online = append(online, n)
		}
	}
	return online, nil
}

// Online reports whether now − last_seen ≤ window; window ≤ 0 means [DefaultOnlineWindow].
// A record whose last_seen does not parse is not online.
func Online(n api.NodeView, now time.Time, window time.Duration) bool {
	if window <= 0 {
		window = DefaultOnlineWindow
	}
	seen, err := canonical.ParseTime(n.LastSeen)
	return err == nil && now.Sub(seen) <= window
}
