package bench

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/mr-tron/base58"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/daemon"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/badger"
)

// The restart scenario measures what a daemon with a large node table costs to start: the
// store is filled through the store API, which takes seconds where registering the same
// nodes over HTTP would take many minutes of signing and verifying, then a daemon is started
// on it and timed until it serves.

const (
	restartDefaultNodes = 1_000_000
	// restartMaxNodes bounds the disk, memory and time one run can take.
	restartMaxNodes = 5_000_000
	// restartBatch is the nodes written per transaction: large enough that a sync is shared
	// by many records, well under Badger's transaction size limit.
	restartBatch = 1000
	// restartWriters is how many transactions are in flight at once, so that building the
	// next batch overlaps the sync of the last.
	restartWriters = 4
	// restartHealthTimeout bounds the wait, once the daemon serves, for /health to count
	// every node.
	restartHealthTimeout = time.Minute
	// restartProgressEvery is how often a long fill reports how far it got.
	restartProgressEvery = 10 * time.Second
)

// restartResult is the restart scenario's figures, and its JSON line.
type restartResult struct {
	Scenario             string   `json:"scenario"`
	Target               string   `json:"target"`
	Nodes                int      `json:"nodes"`
	PopulateS            float64  `json:"populate_s"`
	DiskMB               float64  `json:"disk_mb"`
	ReadyS               float64  `json:"ready_s"`
	TableLoadS           *float64 `json:"table_load_s,omitempty"`
	HealthS              float64  `json:"health_s"`
	HealthCount          int      `json:"health_count"`
	DaemonRSSMB          float64  `json:"daemon_rss_mb"`
	DaemonHWMMB          float64  `json:"daemon_hwm_mb"`
	FirstListS           float64  `json:"first_list_s"`
	ListBytes            int64    `json:"list_bytes"`
	Listed               int      `json:"listed"`
	DaemonRSSAfterListMB float64  `json:"daemon_rss_after_list_mb"`
	DaemonHWMAfterListMB float64  `json:"daemon_hwm_after_list_mb"`
	StopS                float64  `json:"stop_s"`
	CPUs                 int      `json:"cpus"`
	LoadBefore           *float64 `json:"load_avg_before,omitempty"`
}

func (b *bench) runRestart(ctx context.Context) (*restartResult, error) {
	n := b.cfg.nodes
	if n == 0 {
		n = restartDefaultNodes
	}
	say := func(format string, args ...any) {
		fmt.Fprintf(b.text, "restart: "+format+"\n", args...)
	}
	res := &restartResult{Scenario: "restart", Target: "spawn-badger", Nodes: n, CPUs: runtime.NumCPU(), LoadBefore: b.loadBefore}
	dir, err := os.MkdirTemp("", "svrpd-bench-restart-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	say("filling a Badger store with %s nodes through the store API (%d writers, %d nodes per transaction)", group(float64(n)), restartWriters, restartBatch)
	start := time.Now()
	if err := populateNodes(ctx, dir, n, say); err != nil {
		return nil, fmt.Errorf("filling the store: %w", err)
	}
	res.PopulateS = round(time.Since(start).Seconds(), 2)
	size, err := dirSize(dir)
	if err != nil {
		return nil, err
	}
	res.DiskMB = round(float64(size)/(1<<20), 1)
	say("filled in %.1fs, %.1f MB on disk", res.PopulateS, res.DiskMB)

	// A daemon that needs longer than this to load its table is far off any target, and
	// the bound keeps a broken one from holding the run.
	limit := daemonServeTimeout + time.Duration(n/restartDefaultNodes)*2*time.Minute
	level, _ := daemon.ParseLevel(b.cfg.logLevel)
	d, err := spawnDaemon(ctx, b.start, b.daemonBin, daemonArgs(false, dir, b.cfg.prefix), b.stderr, level, limit)
	if err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			d.kill()
		}
	}()
	d.mu.Lock()
	res.ReadyS = round(d.servingAt.Sub(d.started).Seconds(), 3)
	if d.tableLogged {
		s := round(d.tableLoad.Seconds(), 3)
		res.TableLoadS = &s
	}
	d.mu.Unlock()
	say("svrpd serve (pid %d) logged that it serves %.2fs after exec", d.pid, res.ReadyS)

	c, err := dialBench(d.addr)
	if err != nil {
		return nil, fmt.Errorf("connecting to the daemon: %w", err)
	}
	defer c.close()
	healthReq := appendRequest(nil, "GET", d.addr, "/health", "", nil)
	deadline := time.Now().Add(restartHealthTimeout)
	for {
		status, err := c.roundTrip(healthReq, time.Now())
		if err == nil && status == http.StatusOK {
			if count, ok := jsonIntField(c.body, "count"); ok {
				res.HealthCount = int(count)
				if count == int64(n) {
					break
				}
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("GET /health did not count %s nodes within %s of serving (last: status %d, count %d, %v)", group(float64(n)), restartHealthTimeout, status, res.HealthCount, err)
		}
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			return nil, err
		}
	}
	res.HealthS = round(time.Since(d.started).Seconds(), 3)
	m, err := d.memory()
	if err != nil {
		return nil, err
	}
	res.DaemonRSSMB, res.DaemonHWMMB = m.rss, m.hwm
	say("GET /health counted %s nodes %.2fs after exec; daemon RSS %.0f MB, peak %.0f MB", group(float64(res.HealthCount)), res.HealthS, m.rss, m.hwm)

	listReq := appendRequest(nil, "GET", d.addr, "/nodes", "", nil)
	t0 := time.Now()
	status, err := c.roundTrip(listReq, t0)
	res.FirstListS = round(time.Since(t0).Seconds(), 3)
	if err != nil {
		return nil, fmt.Errorf("GET /nodes: %w", err)
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET /nodes: %s", answerCode(status, c.body))
	}
	res.ListBytes = c.bodyLen
	listed, ok := jsonIntField(c.body, "count")
	if !ok {
		return nil, errors.New("GET /nodes: no count at the head of the answer")
	}
	res.Listed = int(listed)
	if m, err = d.memory(); err != nil {
		return nil, err
	}
	res.DaemonRSSAfterListMB, res.DaemonHWMAfterListMB = m.rss, m.hwm
	say("the first GET /nodes took %.2fs: %s nodes in %.1f MB; daemon RSS %.0f MB after it, peak %.0f MB",
		res.FirstListS, group(float64(res.Listed)), float64(res.ListBytes)/(1<<20), m.rss, m.hwm)

	c.close()
	t1 := time.Now()
	stopped = true
	if err := d.stop(); err != nil {
		return nil, err
	}
	res.StopS = round(time.Since(t1).Seconds(), 3)
	say("stopped on SIGTERM in %.2fs", res.StopS)
	if res.Listed != n {
		return res, fmt.Errorf("GET /nodes listed %s nodes of the %s in the store", group(float64(res.Listed)), group(float64(n)))
	}
	return res, nil
}

// reportRestart prints the restart scenario's JSON line; its text was said as it ran.
func (b *bench) reportRestart(res *restartResult) {
	line, err := json.Marshal(res)
	if err != nil {
		fmt.Fprintf(b.stderr, "svrpd bench: encoding the result: %v\n", err)
		return
	}
	fmt.Fprintf(b.stdout, "%s\n", line)
}

// populateNodes writes n node records, as registrations would leave them, into a new Badger
// store in dir and closes it.
func populateNodes(ctx context.Context, dir string, n int, say func(string, ...any)) (err error) {
	fallback := shortCollisions(n)
	st, err := badger.Open(dir)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := st.Close(); err == nil {
			err = cerr
		}
	}()
	var written atomic.Int64
	progress := time.NewTicker(restartProgressEvery)
	defer progress.Stop()
	quiet := make(chan struct{})
	defer close(quiet)
	go func() {
		for {
			select {
			case <-quiet:
				return
			case <-progress.C:
				say("  %s of %s nodes written", group(float64(written.Load())), group(float64(n)))
			}
		}
	}()
	now := time.Now().UTC().Truncate(time.Second)
	batches := (n + restartBatch - 1) / restartBatch
	return parallel(ctx, batches, restartWriters, func(_, bi int) error {
		lo := bi * restartBatch
		hi := min(lo+restartBatch, n)
		nodes := make([]store.Node, 0, hi-lo)
		for i := lo; i < hi; i++ {
			nd, err := restartNode(i, fallback[i], now)
			if err != nil {
				return err
			}
			nodes = append(nodes, nd)
		}
		err := st.Update(ctx, func(tx store.Tx) error {
			for _, nd := range nodes {
				if err := tx.PutNode(nd); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil {
			written.Add(int64(hi - lo))
		}
		return err
	})
}

// restartKey is node i's public key: deterministic, so that two runs fill the same store.
// It need not be a point on the curve; nothing verifies a stored record's key again.
func restartKey(i int) didkey.PublicKey {
	var seed [len("svrpd bench restart node ") + 8]byte
	copy(seed[:], "svrpd bench restart node ")
	binary.BigEndian.PutUint64(seed[len(seed)-8:], uint64(i))
	return didkey.PublicKey(sha256.Sum256(seed[:]))
}

// shortCollisions finds the nodes among n whose short DID another node below them already
// has; they register in the 10-hex fallback form, as the protocol tells a colliding node to
// (a million keys share about a hundred 8-hex bodies).
func shortCollisions(n int) map[int]bool {
	packed := make([]uint64, n)
	for i := range n {
		k := restartKey(i)
		sum := sha256.Sum256(k[:])
		packed[i] = uint64(binary.BigEndian.Uint32(sum[:4]))<<32 | uint64(i)
	}
	slices.Sort(packed)
	fallback := map[int]bool{}
	for j := 1; j < n; j++ {
		if packed[j]>>32 == packed[j-1]>>32 {
			fallback[int(uint32(packed[j]))] = true
		}
	}
	return fallback
}

// restartNode is node i's record as a signed registration leaves it. Its signature is not a
// real one, only as long: nothing checks a stored signature again, and signing a million
// registrations would take longer than the rest of the scenario.
func restartNode(i int, fallback bool, now time.Time) (store.Node, error) {
	k := restartKey(i)
	form := didkey.FormShort
	if fallback {
		form = didkey.FormFallback
	}
	did, err := didkey.NodeDID(k, form)
	if err != nil {
		return store.Node{}, err
	}
	sum := sha512.Sum512(k[:])
	sig := base58.Encode(sum[:])
	return store.Node{
		Key: k, DID: did.String(),
		Endpoint:     fmt.Sprintf("203.0.113.%d:%d", 1+i%254, 1024+i/254),
		Capabilities: []string{"inference"}, Region: "eu-west",
		Signature: &sig, SignatureVerified: true, FirstSeen: now, LastSeen: now,
	}, nil
}

// dirSize is the bytes of the files under dir.
func dirSize(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() {
			info, err := e.Info()
			if err != nil {
				return err
			}
			total += info.Size()
		}
		return nil
	})
	return total, err
}

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
