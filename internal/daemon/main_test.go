package daemon

import (
	"os"
	"testing"

	"github.com/svrp/svrp/internal/svrpdtest"
)

// TestMain removes the svrpd binary the process tests build, once they are all done.
func TestMain(m *testing.M) {
	code := m.Run()
	svrpdtest.Cleanup()
	os.Exit(code)
}
