package testkit

import (
	"net"
	"testing"
)

// FreeAddr returns a loopback address, host and port, that no one listens on at the time of
// the call: for a server a test starts, or for a client that must find no one there.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
