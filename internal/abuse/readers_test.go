package abuse

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/abuse/attack"
	"github.com/svrp/svrp/internal/testkit"
)

// The listing readers of row 1 run in a child process (this test binary, re-run with
// TestListingReaders selected), so that the attack's CPU and garbage land in another
// process than the honest client's whose latency the case measures.
const (
	readersURLEnv   = "ABUSE_READERS_URL"
	readersCountEnv = "ABUSE_READERS_COUNT"
	readersForEnv   = "ABUSE_READERS_FOR"
)

type readers struct {
	cmd *exec.Cmd
	out bytes.Buffer
}

// startReaders starts n readers that list GET /nodes, each from its own address and each
// time with another online_within, for the given time.
func startReaders(t *testing.T, d *daemon, n int, for_ time.Duration) *readers {
	t.Helper()
	r := &readers{cmd: exec.Command(os.Args[0], "-test.run=^TestListingReaders$")}
	r.cmd.Env = append(os.Environ(), readersURLEnv+"="+d.URL, readersCountEnv+"="+strconv.Itoa(n), readersForEnv+"="+for_.String())
	r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.out
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.cmd.Process.Kill(); r.cmd.Wait() })
	return r
}

// wait returns the number of listings read and their bytes.
func (r *readers) wait(t *testing.T) (listings, bytes int64) {
	t.Helper()
	if err := r.cmd.Wait(); err != nil {
		t.Fatalf("the readers failed: %v\n%s", err, r.out.String())
	}
	var found bool
	for _, line := range bytesLines(r.out.Bytes()) {
		if _, err := fmt.Sscanf(line, "readers: %d listings %d bytes", &listings, &bytes); err == nil {
			found = true
		}
	}
	if !found {
		t.Fatalf("the readers reported nothing:\n%s", r.out.String())
	}
	return listings, bytes
}

func bytesLines(b []byte) []string {
	var out []string
	for _, l := range bytes.Split(b, []byte("\n")) {
		out = append(out, string(bytes.TrimSpace(l)))
	}
	return out
}

// TestListingReaders is the readers' process; run on its own it does nothing.
func TestListingReaders(t *testing.T) {
	url := os.Getenv(readersURLEnv)
	if url == "" {
		t.Skip("runs only as the readers' process of row 1")
	}
	n, _ := strconv.Atoi(os.Getenv(readersCountEnv))
	dur, _ := time.ParseDuration(os.Getenv(readersForEnv))
	tg := attack.NewTarget(url, "")
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var listings, sent atomic.Int64
	testkit.Together(n, func(r int) {
		c := from(addr(100 + r))
		for i := 0; ctx.Err() == nil; i++ {
			status, got, err := tg.Listing(ctx, c, r*100000+i)
			if (err != nil || status != http.StatusOK) && ctx.Err() == nil {
				t.Errorf("listing: %d, %v", status, err)
				return
			}
			listings.Add(1)
			sent.Add(got)
		}
	})
	fmt.Printf("readers: %d listings %d bytes\n", listings.Load(), sent.Load())
}
