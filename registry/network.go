package registry

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/store"
)

// The network at a glance (GET /v1/network/stats, docs/protocol.md §5.1): counts of the
// node table now, and a history sampled each minute.
//
// The history is a few series, each a ring of a fixed number of steps, so it takes the same
// memory and store space whatever the network's size or the daemon's age. Each step is kept
// in the store as a counter (the generic windowed count of the store: Count is the value,
// Start the step's beginning) under a key that the ring reuses, so the history survives a
// restart on any durable store, daemons sharing a store share it, and the sweep removes
// steps older than the longest series. A sample merges into the step it falls in as its
// series says: daemons sharing a store each add the heartbeats they took, and write the same
// node counts.

// series is one history: a value per step over slots steps, and how a sample merges with
// what the step already holds.
type series struct {
	name  string
	step  time.Duration
	slots int
	merge func(stored, sample int) int
}

func latest(_, sample int) int   { return sample }
func sum(stored, sample int) int { return stored + sample }

// highest keeps the most nodes seen online at any sample of a step.
func highest(stored, sample int) int { return max(stored, sample) }

// networkSeries are the histories kept, in the order of a sample's values.
var networkSeries = []series{
	{"online-1m", time.Minute, 24 * 60, highest},
	{"online-10m", 10 * time.Minute, 7 * 24 * 6, highest},
	{"heartbeats-1m", time.Minute, 24 * 60, sum},
	{"registrations-1h", time.Hour, 7 * 24, highest},
}

// networkCounterPrefix begins the store counter of every step of every series.
const networkCounterPrefix = "network/"

// index returns the ring slot of the step that begins at at.
func (se series) index(at time.Time) int {
	return int((at.Unix() / int64(se.step/time.Second)) % int64(se.slots))
}

// slot returns the store key and the beginning of the step of se that t falls in.
func (se series) slot(t time.Time) (string, time.Time) {
	at := t.Truncate(se.step)
	return networkCounterPrefix + se.name + "/" + strconv.Itoa(se.index(at)), at
}

// keys returns the store keys of every step of se, in slot order.
func (se series) keys() []string {
	out := make([]string, se.slots)
	for i := range out {
		out[i] = networkCounterPrefix + se.name + "/" + strconv.Itoa(i)
	}
	return out
}

// networkState is the history in memory, read from the store after each sample, and the
// answer built from it and the node table.
type networkState struct {
	mu      sync.Mutex // one sample or load at a time
	steps   [][]binding.Counter
	loaded  atomic.Bool
	version atomic.Uint64 // loads so far, so that an answer built before one is rebuilt
	sampled uint64        // touches counted into the history so far
	build   sync.Mutex    // one answer built at a time
	answer  atomic.Pointer[networkAnswer]
}

// networkAnswer is GET /v1/network/stats as built at one moment: its bytes, their tag and,
// once asked for, their gzip form.
type networkAnswer struct {
	at      time.Time
	version uint64
	body    []byte
	tag     string
	gzOnce  sync.Once
	gz      []byte
}

// SampleNetwork records the network's state in the history: the nodes online and registered
// this hour, and the heartbeats this daemon accepted since its last sample. [Service.Run]
// calls it every minute, on every registry of a shared store.
func (s *Service) SampleNetwork(ctx context.Context) error {
	n := &s.network
	n.mu.Lock()
	defer n.mu.Unlock()
	now := s.now()
	c, err := s.countNodes(ctx, now)
	if err != nil {
		return err
	}
	touches := s.touches.Load()
	beats := int(touches - n.sampled)
	values := []int{c.online, c.online, beats, c.registeredThisHour}
	err = s.store.Update(ctx, func(tx store.Tx) error {
		for i, se := range networkSeries {
			key, at := se.slot(now)
			stored, err := tx.Counter(key)
			if err != nil {
				return err
			}
			v := values[i]
			if stored.Start.Equal(at) {
				v = se.merge(stored.Count, v)
			}
			if err := tx.PutCounter(key, binding.Counter{Count: v, Start: at}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	n.sampled = touches
	return s.loadNetworkLocked(ctx)
}

// loadNetworkLocked reads the history from the store; n.mu is held.
func (s *Service) loadNetworkLocked(ctx context.Context) error {
	n := &s.network
	var keys []string
	for _, se := range networkSeries {
		keys = append(keys, se.keys()...)
	}
	var got []binding.Counter
	err := s.store.View(ctx, func(tx store.Tx) error {
		var err error
		got, err = tx.Counters(keys...)
		return err
	})
	if err != nil {
		return err
	}
	n.steps = n.steps[:0]
	for _, se := range networkSeries {
		n.steps = append(n.steps, got[:se.slots])
		got = got[se.slots:]
	}
	n.loaded.Store(true)
	n.version.Add(1)
	return nil
}

// nodeCounts is what one pass over the node table counts.
type nodeCounts struct {
	nodes, online, registeredThisHour int
	windows                           []int // nodes seen within each of networkWindows
	regions, capabilities, reach      map[string]*api.Group
}

// networkWindows are the windows, in seconds, the online counts are given for: the page
// lets its reader pick one.
var networkWindows = []int{60, 300, int(DefaultOnlineWindow / time.Second), 3600, 86400}

// countNodes counts the node table at now.
func (s *Service) countNodes(ctx context.Context, now time.Time) (nodeCounts, error) {
	c := nodeCounts{windows: make([]int, len(networkWindows)),
		regions: map[string]*api.Group{}, capabilities: map[string]*api.Group{}, reach: map[string]*api.Group{}}
	hour := now.Truncate(time.Hour)
	add := func(m map[string]*api.Group, name string, online bool) {
		g := m[name]
		if g == nil {
			g = &api.Group{Name: name}
			m[name] = g
		}
		g.Nodes++
		if online {
			g.Online++
		}
	}
	count := func(n *store.Node) error {
		c.nodes++
		age := now.Sub(n.LastSeen)
		online := age <= DefaultOnlineWindow
		if online {
			c.online++
		}
		for i, w := range networkWindows {
			if age <= time.Duration(w)*time.Second {
				c.windows[i]++
			}
		}
		if !n.FirstSeen.Before(hour) {
			c.registeredThisHour++
		}
		add(c.regions, n.Region, online)
		add(c.reach, Reachability(n.Endpoint), online)
		for _, cp := range n.Capabilities {
			add(c.capabilities, cp, online)
		}
		return nil
	}
	return c, s.store.ScanNodes(ctx, count)
}

// networkAnswer returns the current answer of GET /v1/network/stats. It is rebuilt — one
// pass over the node table — when it is networkStatsMaxAge old or a sample came since; a
// request meanwhile reads it as built. While one is being rebuilt, others get the one
// before.
func (s *Service) networkAnswer(ctx context.Context) (*networkAnswer, error) {
	n := &s.network
	now := s.now()
	fresh := func(a *networkAnswer) bool {
		return a != nil && a.version == n.version.Load() && now.Sub(a.at) < networkStatsMaxAge
	}
	a := n.answer.Load()
	if fresh(a) {
		return a, nil
	}
	if !n.build.TryLock() {
		if a != nil {
			return a, nil
		}
		n.build.Lock()
	}
	defer n.build.Unlock()
	if a := n.answer.Load(); fresh(a) {
		return a, nil
	}
	if !n.loaded.Load() {
		n.mu.Lock()
		err := s.loadNetworkLocked(ctx)
		n.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	a, err := s.buildNetworkAnswer(ctx, now)
	if err != nil {
		return nil, err
	}
	n.answer.Store(a)
	return a, nil
}

// buildNetworkAnswer counts the node table and renders the history as it stands at now.
func (s *Service) buildNetworkAnswer(ctx context.Context, now time.Time) (*networkAnswer, error) {
	n := &s.network
	c, err := s.countNodes(ctx, now)
	if err != nil {
		return nil, err
	}
	v := api.NetworkStats{
		At:           canonical.FormatTime(now),
		Nodes:        c.nodes,
		OnlineWindow: int(DefaultOnlineWindow / time.Second),
		Regions:      breakdown(c.regions),
		Capabilities: breakdown(c.capabilities),
		Reachability: breakdown(c.reach),
	}
	for i, w := range networkWindows {
		v.Online = append(v.Online, api.OnlineCount{Window: w, Nodes: c.windows[i]})
	}
	n.mu.Lock()
	version := n.version.Load()
	hist := make([]api.Series, len(networkSeries))
	for i, se := range networkSeries {
		hist[i] = render(se, n.steps[i], now)
	}
	n.mu.Unlock()
	v.Online24h, v.Online7d, v.Heartbeats24h, v.Registrations7d = hist[0], hist[1], hist[2], hist[3]
	// The minute sampled last: the current one, or the one before while this one has no
	// sample yet.
	if beats := hist[2].Values; len(beats) > 1 {
		v.HeartbeatsPerMinute = cmp.Or(beats[len(beats)-1], beats[len(beats)-2])
	}
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	body = append(body, '\n')
	return &networkAnswer{at: now, version: version, body: body, tag: etagOf(func(f func([]byte)) { f(body) })}, nil
}

// render turns the stored steps of se into its series ending at the step now falls in; a
// stored step belongs to it when its slot and beginning agree with a step of the span.
func render(se series, steps []binding.Counter, now time.Time) api.Series {
	_, end := se.slot(now)
	out := api.Series{Step: int(se.step / time.Second), End: canonical.FormatTime(end), Values: make([]*int, se.slots)}
	for i := range out.Values {
		at := end.Add(-time.Duration(se.slots-1-i) * se.step)
		if slot := se.index(at); slot < len(steps) && steps[slot].Start.Equal(at) {
			v := steps[slot].Count
			out.Values[i] = &v
		}
	}
	return out
}

// breakdown orders groups by size and names the networkStatsGroups largest.
func breakdown(m map[string]*api.Group) api.Breakdown {
	groups := make([]api.Group, 0, len(m))
	for _, g := range m {
		groups = append(groups, *g)
	}
	slices.SortFunc(groups, func(a, b api.Group) int {
		if c := cmp.Compare(b.Nodes, a.Nodes); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	out := api.Breakdown{Groups: groups}
	if len(groups) > networkStatsGroups {
		out.Groups = groups[:networkStatsGroups]
		for _, g := range groups[networkStatsGroups:] {
			out.Others.Groups++
			out.Others.Nodes += g.Nodes
			out.Others.Online += g.Online
		}
	}
	return out
}

func (h *handler) networkStats(w http.ResponseWriter, r *http.Request, _ call) {
	a, err := h.s.networkAnswer(r.Context())
	if err != nil {
		h.fail(w, err)
		return
	}
	gz := acceptsGzip(r)
	if conditional(w, r, a.tag, gz) {
		return
	}
	if gz {
		a.gzOnce.Do(func() { a.gz = compress(func(f func([]byte)) { f(a.body) }) })
		writeGzip(w, "application/json", a.gz)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(a.body)))
	w.Write(a.body)
}
