package abuse

import (
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
)

// TestRow4IdleConnections: idle keep-alive connections from many addresses stop at the
// per-address cap and the total cap, the daemon's descriptors stay bounded, and an honest
// client from a fresh address is served during the hold (an idle connection makes room).
func TestRow4IdleConnections(t *testing.T) {
	const total, perAddr, addrs = 120, 10, 20
	d := start(t, "--max-connections", fmt.Sprint(total), "--max-connections-per-address", fmt.Sprint(perAddr))

	// Each connection makes one request and then holds the connection idle (row 4's attack).
	hold := func(ip string) (net.Conn, bool) {
		c, err := d.target().Hold(ip)
		return c, err == nil
	}
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	refusedFromOne := 0
	for a := range addrs {
		for range perAddr + 3 {
			c, ok := hold(addr(a))
			if !ok {
				if a == 0 {
					refusedFromOne++
				}
				continue
			}
			held = append(held, c)
		}
	}
	if refusedFromOne != 3 {
		t.Fatalf("%d of %d connections beyond the per-address cap of one address were refused; want 3", refusedFromOne, perAddr+3)
	}

	// The daemon holds at most the total cap of connections, whatever was attempted.
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", d.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	if len(fds) > total+64 {
		t.Fatalf("the daemon holds %d descriptors with a cap of %d connections", len(fds), total)
	}

	// An honest client from a fresh address is served during the hold.
	for i := range 5 {
		res, err := from(fmt.Sprintf("127.0.0.%d", 10+i)).Get(d.URL + "/health")
		if err != nil {
			t.Fatalf("honest /health during the hold: %v", err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("honest /health during the hold: %d", res.StatusCode)
		}
	}

	// The file limit was raised to its hard limit.
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", d.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(limits), "\n") {
		if f := strings.Fields(l); len(f) >= 5 && strings.HasPrefix(l, "Max open files") && f[3] != f[4] {
			t.Fatalf("open-file limit not raised: %q", l)
		}
	}
	t.Logf("held %d connections (attempted %d), %d descriptors", len(held), addrs*(perAddr+3), len(fds))
}
