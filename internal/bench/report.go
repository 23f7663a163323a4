package bench

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// result is one scenario's figures, and its JSON line.
type result struct {
	Scenario string  `json:"scenario"`
	Target   string  `json:"target"`
	Clients  int     `json:"clients,omitempty"`
	Nodes    int     `json:"nodes,omitempty"`
	VerifyUs float64 `json:"verify_us,omitempty"` // one Ed25519 verify's CPU on one core, this run
	Phases   []phase `json:"phases"`
	// Figures are the scenario's comparisons and other single numbers: ratios between its
	// phases, memory, what an attack got stored.
	Figures map[string]float64 `json:"figures,omitempty"`
}

// phase is one timed window: what was sent, what came back, and what it cost the daemon.
type phase struct {
	Name      string           `json:"name"`
	Ops       int64            `json:"ops"` // answered as asked
	OpsPerS   float64          `json:"ops_per_s"`
	P50ms     float64          `json:"p50_ms"`
	P99ms     float64          `json:"p99_ms"`
	Failed    map[string]int64 `json:"failed,omitempty"` // by status and code
	DurationS float64          `json:"duration_s"`
	// BytesPerOp is what an operation received: status line, headers and body as sent.
	BytesPerOp float64 `json:"bytes_per_op,omitempty"`
	// The daemon's CPU (user and system) per operation in the window, and that over the
	// time of the operation's Ed25519 verifications; only for a spawned daemon.
	Verifies    int      `json:"verifies_per_op,omitempty"`
	CPUUsPerOp  *float64 `json:"cpu_us_per_op,omitempty"`
	CPUVsVerify *float64 `json:"cpu_vs_verify,omitempty"`
	Stopped     string   `json:"stopped,omitempty"` // "requests" or "prepared" when not at --duration
}

func (p *phase) failures() int64 {
	var n int64
	for _, c := range p.Failed {
		n += c
	}
	return n
}

// print writes res as text to the readable report and as one JSON line to stdout.
func (b *bench) print(res *result) {
	for _, p := range res.Phases {
		name := res.Scenario
		if p.Name != res.Scenario {
			name += ": " + p.Name
		}
		fmt.Fprintf(b.text, "%s: %s ops/s, p50 %.2f ms, p99 %.2f ms, %s ops in %.1fs", name, group(p.OpsPerS), p.P50ms, p.P99ms, group(float64(p.Ops)), p.DurationS)
		if p.BytesPerOp > 0 {
			fmt.Fprintf(b.text, ", %s bytes per op", group(p.BytesPerOp))
		}
		if p.CPUUsPerOp != nil {
			fmt.Fprintf(b.text, ", daemon CPU %.1f µs per op", *p.CPUUsPerOp)
		}
		if p.CPUVsVerify != nil {
			fmt.Fprintf(b.text, " (%.2f× its %d verifies)", *p.CPUVsVerify, p.Verifies)
		}
		if p.Stopped != "" {
			fmt.Fprintf(b.text, "; stopped when the %s ran out", p.Stopped)
		}
		fmt.Fprintln(b.text)
		if len(p.Failed) > 0 {
			fmt.Fprintf(b.text, "%s: failed: %s\n", name, countText(p.Failed))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(res.Figures)) {
		fmt.Fprintf(b.text, "%s: %s %v\n", res.Scenario, k, res.Figures[k])
	}
	line, _ := json.Marshal(res)
	fmt.Fprintln(b.stdout, string(line))
}

// countText lists counts by key, largest first.
func countText(m map[string]int64) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		if m[a] != m[b] {
			return int(m[b] - m[a])
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// verifyTime is the CPU time one Ed25519 verification of a message about a heartbeat's size
// takes on one core, verifying for d. It is CPU time, not wall time, so that other work on
// the machine does not inflate it; where the CPU time cannot be read it is wall time.
func verifyTime(ctx context.Context, d time.Duration) time.Duration {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	msg := []byte(strings.Repeat("service-node-heartbeat:v1\ndid:svrp:n:0123abcd\n1767225600\n", 3)[:150])
	sig := ed25519.Sign(priv, msg)
	cpu0, cpuErr := processCPU(os.Getpid())
	start := time.Now()
	var n int64
	for time.Since(start) < d && ctx.Err() == nil {
		for range 64 {
			ed25519.Verify(pub, msg, sig)
		}
		n += 64
	}
	spent := time.Since(start)
	if cpu1, err := processCPU(os.Getpid()); cpuErr == nil && err == nil && cpu1 > cpu0 {
		spent = cpu1 - cpu0
	}
	if n == 0 {
		return 0
	}
	return spent / time.Duration(n)
}

// latencies are the durations of a window's operations.
type latencies []time.Duration

// quantile is the q-th quantile of sorted l.
func (l latencies) quantile(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(l)))) - 1
	return l[max(0, min(i, len(l)-1))]
}

func ms(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 3) }

func round(v float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(v*p) / p
}

// setRatio sets the figure name to a/b, rounded, unless b is 0 (too little to measure).
func (r *result) setRatio(name string, a, b float64) {
	if b > 0 {
		r.Figures[name] = round(a/b, 2)
	}
}

// group writes a number rounded to an integer with thousands separators.
func group(v float64) string {
	s := strconv.FormatInt(int64(math.Round(math.Abs(v))), 10)
	var b strings.Builder
	if v < 0 {
		b.WriteByte('-')
	}
	for i, ch := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(ch)
	}
	return b.String()
}

// lockedWriter serializes writes from several goroutines to one writer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
