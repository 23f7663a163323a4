package attack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/client"
)

// Row is one way of attacking a registry.
type Row struct {
	N     int
	What  string // the attack
	Bound string // what the registry keeps against it, and what the abuse test asserts
	// Flags, added to svrpd serve's, change a default limit that a flood's setup could not
	// live with.
	Flags []string
	// TLS says the attack needs the registry served over TLS, where HTTP/2 is offered.
	TLS bool
	// Setup prepares what Attack needs, before any honest client is measured.
	Setup func(ctx context.Context, t *Target) (any, error)
	// Attack floods t until stop is closed, from as many goroutines as it likes, and hands
	// every answer to count; state is what Setup returned. It returns once it has stopped.
	Attack func(ctx context.Context, t *Target, state any, stop <-chan struct{}, count func(Answer))
	// Holds, for an attack that holds connections, is how many it opens, each counted 200
	// once open: what it measures is the slots held, so honest clients are measured once
	// they are, not while they open (a connection flood, row 4's).
	Holds int
	// Stored, for an attack that makes the registry keep records, is how many it kept, from
	// the answers counted and the registry's node count (nodes before the attack began);
	// Reference puts as many honest records into another registry, whose memory is what the
	// attack's is compared with.
	Stored    func(ctx context.Context, t *Target, answers map[string]int64, nodes int) int
	Reference func(ctx context.Context, t *Target, count int) error
}

// Flood runs fn from workers goroutines until stop is closed.
func Flood(workers int, stop <-chan struct{}, fn func(w, i int)) {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				fn(w, i)
			}
		}()
	}
	wg.Wait()
}

// Pick returns the rows named in list ("1,3"), or all of them when list is empty.
func Pick(list string) ([]Row, error) {
	if list == "" {
		return Rows, nil
	}
	var out []Row
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		i := slices.IndexFunc(Rows, func(r Row) bool { return r.N == n })
		if err != nil || i < 0 {
			return nil, fmt.Errorf("%q is not a row of the abuse suite (1 to %d)", f, len(Rows))
		}
		out = append(out, Rows[i])
	}
	return out, nil
}

// Get is row n.
func Get(n int) Row {
	i := slices.IndexFunc(Rows, func(r Row) bool { return r.N == n })
	if i < 0 {
		panic(fmt.Sprintf("attack: no row %d", n))
	}
	return Rows[i]
}

// Rows are the attacks, in the order of the abuse suite.
var Rows = []Row{
	{N: 1, What: "unsigned registrations with a 63 KB signature from one address, and listings with many online_within values",
		Bound: "a huge signature is refused before grace mode and stores nothing; past its malformed-request budget the address is refused; a record is bounded; listings with distinct filters share one build",
		Attack: func(ctx context.Context, t *Target, _ any, stop <-chan struct{}, count func(Answer)) {
			hc := t.HTTP(Addr(Attackers, 1))
			Flood(4, stop, func(w, i int) {
				if w == 0 {
					status, _, err := t.Listing(ctx, hc, i%600)
					if err != nil {
						count(Answer{Code: err.Error()})
						return
					}
					count(Answer{Status: status})
					return
				}
				n, err := FreshNode(t.Client(Addr(Attackers, 1)))
				if err != nil {
					count(Of(err))
					return
				}
				count(t.Send(ctx, hc, http.MethodPost, "/api/v1/register", HugeRegistration(n.PublicKey()), nil))
			})
		},
		Stored:    storedNodes,
		Reference: registerNodes,
	},
	{N: 2, What: "binding initiates with a fresh key each, from one address and then 40",
		Bound: "an address's initiate budget, then the global cap of open sessions; a refused initiate opens nothing and the data directory stays small",
		Attack: func(ctx context.Context, t *Target, _ any, stop <-chan struct{}, count func(Answer)) {
			Flood(8, stop, func(w, i int) {
				count(Of(Initiate(ctx, t.Client(Addr(Attackers, w*5+i/200%5)), "")))
			})
		},
		Stored: func(_ context.Context, _ *Target, answers map[string]int64, _ int) int { return int(answers["200"]) },
		Reference: func(ctx context.Context, t *Target, count int) error {
			return Spread(ctx, count, func(i int) error { return Initiate(ctx, t.Client(Addr(Reference, i/100)), "") })
		},
	},
	{N: 3, What: "one key with 1,000 finished sessions, then 8 threads initiating and cancelling for it",
		Bound: "a key's finished sessions are never read: it initiates as fast as a fresh key, its open sessions stay capped, and a finished session's id stays taken",
		// Room in the key's initiate budget for its history, and for 100 more.
		Flags: []string{"--initiate-key-limit", "1100"},
		Setup: func(ctx context.Context, t *Target) (any, error) {
			n, err := FreshNode(t.Client(Addr(Attackers, 0)))
			if err != nil {
				return nil, err
			}
			for i := range 1000 {
				me := &client.Node{Client: t.Client(Addr(Attackers, i/100)), Key: n.Key, DID: n.DID}
				if err := InitiateCancel(ctx, me, ""); err != nil {
					return nil, err
				}
			}
			return n, nil
		},
		Attack: func(ctx context.Context, t *Target, state any, stop <-chan struct{}, count func(Answer)) {
			n := state.(*client.Node)
			Flood(8, stop, func(w, i int) {
				me := &client.Node{Client: t.Client(Addr(Attackers, 100+w*10+i/100%10)), Key: n.Key, DID: n.DID}
				count(Of(InitiateCancel(ctx, me, "")))
			})
		},
	},
	{N: 4, What: "idle keep-alive connections, as many as 64 addresses can open",
		Bound: "connections stop at the per-address cap and the total cap, descriptors stay bounded, and a fresh address is still served",
		Attack: func(ctx context.Context, t *Target, _ any, stop <-chan struct{}, count func(Answer)) {
			var held []net.Conn
			defer func() {
				for _, c := range held {
					c.Close()
				}
			}()
			for i := 0; i < 64*80; i++ {
				select {
				case <-stop:
					return
				default:
				}
				c, err := t.Hold(Addr(Attackers, i%64))
				if err != nil {
					count(Answer{Code: "refused"})
					continue
				}
				count(Answer{Status: http.StatusOK})
				held = append(held, c)
			}
			<-stop
		},
	},
	{N: 5, What: "garbage login signatures with a self-made identity, from one address",
		Bound: "an address's login-failure budget, an operator's that a stranger cannot lock out, the attempt budget and the bearer session cap",
		Setup: func(context.Context, *Target) (any, error) { return NewOperator() },
		Attack: func(ctx context.Context, t *Target, state any, stop <-chan struct{}, count func(Answer)) {
			mallory := state.(Operator)
			c := t.Client(Addr(Attackers, 1))
			Flood(4, stop, func(w, i int) { count(Of(GarbageLogin(ctx, c, mallory.Credential))) })
		},
	},
	{N: 6, What: "wrong short codes from 1,000 addresses with one bearer",
		Bound: "an operator's resolve budget, then the global one; a refused resolve changes nothing; behind a trusted proxy each forwarded client has its own budget",
		Setup: func(ctx context.Context, t *Target) (any, error) {
			mallory, err := NewOperator()
			if err != nil {
				return nil, err
			}
			o, err := mallory.Login(ctx, t.Client(Addr(Attackers, 1)))
			if err != nil {
				return nil, err
			}
			return o.Token, nil
		},
		Attack: func(ctx context.Context, t *Target, state any, stop <-chan struct{}, count func(Answer)) {
			token := state.(string)
			Flood(8, stop, func(w, i int) {
				count(t.Resolve(ctx, t.HTTP(Addr(Attackers, (w*125+i)%1000)), token, WrongCode(w*1_000_000+i), nil))
			})
		},
	},
	{N: 7, What: "an honest node's registration, copied and re-posted from many addresses",
		Bound: "a copied registration changes nothing, last_seen included; an older one cannot roll the endpoint back",
		Setup: func(ctx context.Context, t *Target) (any, error) {
			views, err := t.Client("127.0.0.1").Nodes(ctx, api.NodeFilter{})
			if err != nil {
				return nil, err
			}
			if len(views) == 0 {
				return nil, errors.New("no registered node to copy")
			}
			return Copied(views[0]), nil
		},
		Attack: replay("/api/v1/register"),
	},
	{N: 8, What: "a captured heartbeat replayed by a third party",
		Bound: "a replayed heartbeat changes nothing; an older one is refused; past their budget of replays the replaying addresses and blocks are refused, and only they",
		Setup: func(ctx context.Context, t *Target) (any, error) {
			n, err := FreshNode(t.Client(Addr(Attackers, 0)))
			if err != nil {
				return nil, err
			}
			if _, err := n.Register(ctx, "203.0.113.20:7000", []string{"inference"}, ""); err != nil {
				return nil, err
			}
			// The heartbeat as the node sent it, which a third party captured.
			return n.SignHeartbeat(time.Now().Unix())
		},
		Attack: replay("/api/v1/heartbeat"),
	},
	{N: 9, What: "signed registrations of fresh keys spread over 400 addresses",
		Bound: "the global node cap answers 429 and changes nothing, logged once; known nodes keep registering and heartbeating",
		// The registrations are signed in setup, as an attacker signs on machines of its own:
		// signed in the window, they would take from the cores the daemon is measured on.
		// Setup signs as many as the addresses may register; once they are sent, every
		// fresh key is refused (and answered late), so the few signed in the window then
		// cost the attacker little.
		Setup: func(ctx context.Context, t *Target) (any, error) {
			return freshRegistrations(ctx, t, registerBudget(freshAddresses))
		},
		Attack: func(ctx context.Context, t *Target, state any, stop <-chan struct{}, count func(Answer)) {
			prepared := state.([][]byte)
			var next atomic.Int64
			Flood(8, stop, func(w, i int) {
				ip := Addr(Attackers, (w*50+i)%freshAddresses)
				if k := next.Add(1) - 1; k < int64(len(prepared)) {
					count(t.Post(ctx, t.HTTP(ip), "/api/v1/register", prepared[k]))
					return
				}
				count(Of(RegisterFresh(ctx, t.Client(ip))))
			})
		},
		Stored:    storedNodes,
		Reference: registerNodes,
	},
	{N: 10, What: "nothing: an idle daemon, then honest load alone",
		Bound: "an idle daemon uses under 0.2 % of a core"},
	{N: 11, What: "spread thin: one node in each of 800 /24s of 16 networks fills the node table beside the honest /24's 200 heartbeating nodes; newcomers from fresh /24s keep registering",
		Bound: "no node in use is displaced, however many blocks hold fewer than the honest one: every newcomer 429 with a Retry-After; 100 % of honest heartbeats and logins succeed, honest p99 within 3× of alone",
		// A node table bench can fill, whose honest /24 and /16 hold the honest nodes.
		Flags: []string{"--max-nodes", fmt.Sprint(spreadCap), "--max-nodes-per-block", "250", "--max-nodes-per-network", "250"},
		Setup: func(ctx context.Context, t *Target) (any, error) {
			err := Spread(ctx, spreadCap-t.Nodes(ctx), func(i int) error { return RegisterFresh(ctx, t.Client(Thin(10, i-1))) })
			if err != nil {
				return nil, err
			}
			return freshRegistrations(ctx, t, freshAddresses)
		},
		Attack: func(ctx context.Context, t *Target, state any, stop <-chan struct{}, count func(Answer)) {
			prepared := state.([][]byte)
			Flood(8, stop, func(w, i int) {
				k := w*len(prepared)/8 + i
				count(t.Post(ctx, t.HTTP(Thin(10, spreadCap+k%freshAddresses)), "/api/v1/register", prepared[k%len(prepared)]))
			})
		},
	},
	evenShare(12, "even share, IPv4: a binding session and a bearer session from each of 64 /24s of one /16, then logins and initiates from them on and on", nil,
		func(t *Target, block, i int) *client.Client { return t.Client(Addr(Attackers, block*250+i)) }),
	evenShare(13, "even share, IPv6: a binding session and a bearer session from each of 64 /48s of one /32, forwarded by a trusted proxy, then logins and initiates from them on and on",
		[]string{"--trusted-proxy", "127.1.0.0/16"},
		func(t *Target, block, i int) *client.Client {
			return t.Forwarded(Addr(Attackers, i), fmt.Sprintf("2001:db8:%x::%x", block, i+1))
		}),
}

// spreadCap is row 11's node table: the honest nodes and one attacker node per block.
const spreadCap = 1000

// evenShareCap is the cap of both session tables in the even-share rows, and of the blocks
// of one network the attacker holds an entry in.
const evenShareCap = 64

// evenShare is the row that holds, from each of evenShareCap blocks of one network, a
// bearer session of a made-up operator and an open binding session of a fresh node key,
// with both tables' caps lowered to evenShareCap and every quota at its default share, and
// keeps logging in and initiating from them; from(t, block, i) is the i-th client of a block.
func evenShare(n int, what string, flags []string, from func(t *Target, block, i int) *client.Client) Row {
	type state struct {
		ops   []Operator
		nodes []*client.Node
	}
	return Row{N: n, What: what,
		Bound: "the blocks together hold their network's quota, far below the caps: every request past it 429 with a Retry-After; 100 % of honest logins and heartbeats succeed, honest p99 within 3× of alone",
		Flags: append([]string{"--max-binding-sessions", fmt.Sprint(evenShareCap), "--max-bearer-sessions", fmt.Sprint(evenShareCap)}, flags...),
		Setup: func(ctx context.Context, t *Target) (any, error) {
			var st state
			for block := range evenShareCap {
				o, err := NewOperator()
				if err != nil {
					return nil, err
				}
				nd, err := FreshNode(from(t, block, 0))
				if err != nil {
					return nil, err
				}
				st.ops, st.nodes = append(st.ops, o), append(st.nodes, nd)
				if _, err := o.Login(ctx, from(t, block, 0)); !refusedOrNot(err) {
					return nil, fmt.Errorf("login from block %d: %w", block, err)
				}
				if _, err := nd.Initiate(ctx, client.InitiateOptions{}); !refusedOrNot(err) {
					return nil, fmt.Errorf("initiate from block %d: %w", block, err)
				}
			}
			return st, nil
		},
		Attack: func(ctx context.Context, t *Target, s any, stop <-chan struct{}, count func(Answer)) {
			st := s.(state)
			Flood(8, stop, func(w, i int) {
				k := w*100_000 + i
				block := k % evenShareCap
				c := from(t, block, 1+k/evenShareCap%200)
				if i%2 == 0 {
					_, err := st.ops[block].Login(ctx, c)
					count(Of(err))
					return
				}
				nd := st.nodes[block]
				_, err := (&client.Node{Client: c, Key: nd.Key, DID: nd.DID}).Initiate(ctx, client.InitiateOptions{})
				count(Of(err))
			})
		},
	}
}

// refusedOrNot reports whether err is no error or a RATE_LIMITED refusal: what an attacker
// past its quota gets.
func refusedOrNot(err error) bool {
	return err == nil || client.CodeOf(err) == proto.RateLimited
}

// replay is the attack that posts the request Setup captured to path, again and again, from
// 400 addresses.
func replay(path string) func(ctx context.Context, t *Target, state any, stop <-chan struct{}, count func(Answer)) {
	return func(ctx context.Context, t *Target, captured any, stop <-chan struct{}, count func(Answer)) {
		Flood(4, stop, func(w, i int) {
			count(t.Send(ctx, t.HTTP(Addr(Attackers, w*100+i%100)), http.MethodPost, path, captured, nil))
		})
	}
}

// Initiate opens a binding session for a fresh node key on c, with the session id given
// ("" for a random one).
func Initiate(ctx context.Context, c *client.Client, id string) error {
	n, err := FreshNode(c)
	if err != nil {
		return err
	}
	_, err = n.Initiate(ctx, client.InitiateOptions{SessionID: id})
	return err
}

// InitiateCancel opens a binding session for n and cancels it.
func InitiateCancel(ctx context.Context, n *client.Node, id string) error {
	s, err := n.Initiate(ctx, client.InitiateOptions{SessionID: id})
	if err != nil {
		return err
	}
	_, err = n.Cancel(ctx, s.BindingSessionID)
	return err
}

// Spread runs fn(1..count) from 8 goroutines and returns the first error.
func Spread(ctx context.Context, count int, fn func(i int) error) error {
	var next atomic.Int64
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			for i := next.Add(1); i <= int64(count) && ctx.Err() == nil; i = next.Add(1) {
				if err := fn(int(i)); err != nil {
					errs <- err
					return
				}
			}
			errs <- ctx.Err()
		}()
	}
	var first error
	for range 8 {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// storedNodes is how many nodes the registry holds beyond the nodes it held before.
func storedNodes(ctx context.Context, t *Target, _ map[string]int64, nodes int) int {
	return max(t.Nodes(ctx)-nodes, 0)
}

// Nodes is the registry's node count, as GET /health gives it; 0 if it cannot be read.
func (t *Target) Nodes(ctx context.Context) int {
	h, err := t.Client("127.0.0.1").Health(ctx)
	if err != nil {
		return 0
	}
	return h.Count
}

// freshAddresses are the addresses row 9 registers fresh keys from, and freshEndpoint the
// endpoint each registers.
const (
	freshAddresses = 400
	freshEndpoint  = "203.0.113.1:7000"
)

// The register budgets of svrpd serve's default limits (limits.DefaultLimits, to which the
// abuse tests hold them): the new node keys one address may register per window, how many
// addresses' worth of that one address block may spend, and how many nodes one block's keys
// may hold. This package reaches a registry only over HTTP, so it keeps its own copy.
const (
	DefaultRegisterAddressLimit = 600
	DefaultAddressBlockFactor   = 16
	DefaultMaxNodesPerBlock     = 10_000
)

// blockBudget is how many new node keys one address block may register with the default
// limits.
func blockBudget() int {
	return min(DefaultRegisterAddressLimit*DefaultAddressBlockFactor, DefaultMaxNodesPerBlock)
}

// registerNodes registers count fresh nodes as honest hosts would, spread over address
// blocks, each address and each block using half its register budget, so that none is
// refused and the reference daemon keeps the default limits the attacked one had: its memory
// is compared with the attacked daemon's, so the two differ only in whose records they hold.
func registerNodes(ctx context.Context, t *Target, count int) error {
	return Spread(ctx, count, func(i int) error { return RegisterFresh(ctx, t.Client(referenceAddr(i-1))) })
}

// referenceAddr is the address registerNodes registers its i-th key from (from 0).
func referenceAddr(i int) string {
	perAddress, perBlock := DefaultRegisterAddressLimit/2, blockBudget()/2
	block, j := i/perBlock, i%perBlock
	return Addr(Reference, block*250+j/perAddress)
}

// RegisterFresh registers a fresh node key on c, signing as it sends.
func RegisterFresh(ctx context.Context, c *client.Client) error {
	n, err := FreshNode(c)
	if err == nil {
		_, err = n.Register(ctx, freshEndpoint, []string{"inference"}, "")
	}
	return err
}

// LoginFresh logs a made-up operator in on c.
func LoginFresh(ctx context.Context, c *client.Client) error {
	o, err := NewOperator()
	if err == nil {
		_, err = o.Login(ctx, c)
	}
	return err
}

// freshRegistrations signs count registrations of fresh node keys and returns them encoded.
func freshRegistrations(ctx context.Context, t *Target, count int) ([][]byte, error) {
	c := t.Client(Addr(Attackers, 0))
	out := make([][]byte, count)
	return out, Spread(ctx, count, func(i int) error {
		n, err := FreshNode(c)
		if err != nil {
			return err
		}
		r, err := n.SignRegistration(freshEndpoint, []string{"inference"}, "")
		if err == nil {
			out[i-1], err = json.Marshal(r)
		}
		return err
	})
}

// registerBudget is how many new node keys the first n addresses of a group (Addr's 250 to a
// block) may register in a window with the default limits: each address its own budget,
// each block at most its block's.
func registerBudget(n int) int {
	total := 0
	for first := 0; first < n; first += 250 {
		total += min((min(first+250, n)-first)*DefaultRegisterAddressLimit, blockBudget())
	}
	return total
}
