package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"net/http"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"
)

// note reports a setup step as it completes, since setup can take longer than the window.
func (r *benchRun) note(format string, args ...any) {
	r.say(format, args...)
}

// report prints a scenario's figures as text, unless --json, and as one JSON line.
func (b *bench) report(res *benchResult) {
	say := func(format string, args ...any) {
		fmt.Fprintf(b.text, res.Scenario+": "+format+"\n", args...)
	}
	say("setup took %.1fs", res.SetupS)
	stopped := map[string]string{
		"duration":    "",
		"requests":    " (stopped at --requests)",
		"prepared":    " (stopped early: every prepared request was used; the calibration underestimated the rate)",
		"interrupted": " (interrupted)",
	}[res.Stopped]
	clients := "clients"
	if res.Clients == 1 {
		clients = "client"
	}
	say("%s ops/s for %.1fs with %d %s%s", group(res.OpsPerS), res.DurationS, res.Clients, clients, stopped)
	if res.Scenario == "journey" {
		say("%s journeys, %s requests (%s requests/s)", group(float64(res.Ops)), group(float64(res.Requests)), group(res.RequestsPerS))
	} else {
		say("%s ok of %s requests", group(float64(res.Ops)), group(float64(res.Requests)))
	}
	say("latency p50 %.2f ms, p99 %.2f ms", res.P50ms, res.P99ms)
	for _, s := range res.Steps {
		say("  %-10s p50 %.2f ms, p99 %.2f ms", s.Step, s.P50ms, s.P99ms)
	}
	if res.Errors == 0 {
		say("errors: none")
	} else {
		say("errors: %d (%s)", res.Errors, errorText(res.ErrorsByCode))
	}
	switch {
	case res.VerifiesPerOp == 0:
		say("fraction of the verify ceiling: n/a (no signature to verify)")
	case res.FractionOfCeiling == nil:
		say("fraction of the verify ceiling: not measured (--ceiling-time 0)")
	default:
		unit := "verifies"
		if res.VerifiesPerOp == 1 {
			unit = "verify"
		}
		say("%s ops/s = %.2f of the verify ceiling (%s verifies/s; %d %s per op)",
			group(res.OpsPerS), *res.FractionOfCeiling, group(res.CeilingVerifiesPerS), res.VerifiesPerOp, unit)
	}
	if res.ServerCPUS != nil && res.ServerCPUUsPerOp != nil {
		op := "op"
		if res.Scenario == "journey" {
			op = "journey"
		}
		line := fmt.Sprintf("server CPU %.2f s in the window (%.2f of %d CPUs busy): %.1f µs per %s",
			*res.ServerCPUS, *res.ServerCPUS/res.DurationS, res.CPUs, *res.ServerCPUUsPerOp, op)
		if res.CPUVsVerify != nil && res.VerifyUs != nil {
			unit := "verifies"
			if res.VerifiesPerOp == 1 {
				unit = "verify"
			}
			line += fmt.Sprintf(" = %.2f× its %d %s (%.1f µs each)", *res.CPUVsVerify, res.VerifiesPerOp, unit, *res.VerifyUs)
		}
		say("%s", line)
	}
	if res.DaemonRSSReadyMB != nil && res.DaemonHWMSetupMB != nil && res.DaemonRSSPeakWindowMB != nil && res.DaemonRSSEndMB != nil && res.DaemonRSSGrowthMB != nil {
		how := "VmHWM, reset as the window began"
		if res.DaemonPeakSource == "sampled" {
			how = "the largest VmRSS sampled every 50 ms; the kernel refused to reset VmHWM"
		}
		say("daemon RSS %.0f MB after setup (setup peaked at %.0f MB), %.0f MB after the run", *res.DaemonRSSReadyMB, *res.DaemonHWMSetupMB, *res.DaemonRSSEndMB)
		say("daemon RSS peak in the window %.0f MB (%s): grew %.0f MB while serving", *res.DaemonRSSPeakWindowMB, how, *res.DaemonRSSGrowthMB)
	}
	if res.GeneratorRSSMB != nil && res.GeneratorHWMMB != nil {
		say("generator RSS %.0f MB, peak %.0f MB (bench's own process)", *res.GeneratorRSSMB, *res.GeneratorHWMMB)
	}
	if res.RSSStartMB != nil && res.RSSReadyMB != nil && res.RSSEndMB != nil && res.HWMMB != nil {
		say("RSS %.0f MB at start, %.0f MB after setup, %.0f MB after the run, peak %.0f MB (the whole process: registry, store and generator)",
			*res.RSSStartMB, *res.RSSReadyMB, *res.RSSEndMB, *res.HWMMB)
	}
	line, err := json.Marshal(res)
	if err != nil {
		fmt.Fprintf(b.stderr, "svrpd bench: encoding the result: %v\n", err)
		return
	}
	fmt.Fprintf(b.stdout, "%s\n", line)
}

func errorText(errs map[string]int64) string {
	keys := make([]string, 0, len(errs))
	for k := range errs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return errs[keys[i]] > errs[keys[j]] || (errs[keys[i]] == errs[keys[j]] && keys[i] < keys[j])
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, errs[k])
	}
	return strings.Join(parts, ", ")
}

// rssMB returns this process's resident set and its peak, in MB, after returning free
// memory to the system, so the resident figure is memory in use rather than garbage that
// has not been collected yet. It returns nils where /proc is not available.
func rssMB() (rss, hwm *float64) {
	debug.FreeOSMemory()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil, nil
	}
	return parseStatus(b)
}

// loadAverage returns the machine's one-minute load average, or nil where /proc is not
// available: a busy machine lowers both the ceiling and the scenario figures.
func loadAverage() *float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	first, _, _ := strings.Cut(string(b), " ")
	v, err := strconv.ParseFloat(first, 64)
	if err != nil {
		return nil
	}
	return &v
}

// histogram records latencies in buckets of about 1.6 % width: exact below 128 ns, then 64
// buckets per power of two. Recording is an index computation and an increment.
type histogram struct {
	counts [histBuckets]uint64
	n      uint64
	max    int64
}

const (
	histSub     = 64
	histBuckets = 2*histSub + 57*histSub
)

func histIndex(v uint64) int {
	if v < 2*histSub {
		return int(v)
	}
	shift := bits.Len64(v) - 7
	return 2*histSub + (shift-1)*histSub + int(v>>shift) - histSub
}

// histValue is the middle of bucket i.
func histValue(i int) int64 {
	if i < 2*histSub {
		return int64(i)
	}
	k := i - 2*histSub
	shift := k/histSub + 1
	m := int64(k%histSub + histSub)
	return m<<shift + (int64(1)<<shift)/2
}

func (h *histogram) record(d time.Duration) {
	v := int64(d)
	if v < 0 {
		v = 0
	}
	h.counts[histIndex(uint64(v))]++
	h.n++
	if v > h.max {
		h.max = v
	}
}

func (h *histogram) add(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var cum uint64
	for i, c := range h.counts {
		cum += c
		if cum >= rank {
			return time.Duration(min(histValue(i), h.max))
		}
	}
	return time.Duration(h.max)
}

func ms(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 3) }

func round(v float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(v*p) / p
}

// group writes a number rounded to an integer with thousands separators.
func group(v float64) string {
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, ch := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(ch)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// startProfile starts the CPU profile of one timed window when --cpuprofile asks for it: the
// daemon's when the target is one spawned with its profiler, else this process's. With
// several scenarios each window overwrites the file, so it holds the last one. stop ends it
// and reports whether the file was written whole.
func (b *bench) startProfile(ctx context.Context, t *benchTarget) (stop func() error, err error) {
	if b.cfg.cpuProfile == "" {
		return func() error { return nil }, nil
	}
	if t.daemon != nil && t.daemon.debugAddr != "" {
		return startDaemonProfile(ctx, t.daemon.debugAddr, b.cfg.cpuProfile, b.cfg.duration)
	}
	f, err := os.Create(b.cfg.cpuProfile)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// profileSettle is how long bench waits after asking a daemon for its CPU profile before
// the window begins. The daemon answers only when the profile ends, so nothing tells when it
// began; on loopback it begins within a millisecond, and this leaves room for a busy machine.
const profileSettle = 250 * time.Millisecond

// startDaemonProfile asks the profiler at addr for a CPU profile that covers the settle time
// and a window of the given duration, in the whole seconds the profiler takes, and writes
// it to path as it arrives. The profile runs on past a window that ends early; stop waits
// for its end.
func startDaemonProfile(ctx context.Context, addr, path string, window time.Duration) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	seconds := int64(math.Ceil((profileSettle + window).Seconds())) + 1
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, seconds)
	c := http.Client{Timeout: time.Duration(seconds)*time.Second + time.Minute}
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
			if err != nil {
				return err
			}
			resp, err := c.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
				return fmt.Errorf("%s: %s %s", url, resp.Status, strings.TrimSpace(string(msg)))
			}
			_, err = io.Copy(f, resp.Body)
			return err
		}()
	}()
	fail := func(err error) error {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("the daemon's CPU profile: %w", err)
	}
	select {
	case err := <-done:
		if err == nil {
			err = errors.New("it ended before the window began")
		}
		return nil, fail(err)
	case <-time.After(profileSettle):
	}
	return func() error {
		if err := <-done; err != nil {
			return fail(err)
		}
		return f.Close()
	}, nil
}
