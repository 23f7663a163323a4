package cli

import (
	"testing"

	"github.com/svrp/svrp/internal/svrpdtest"
)

func TestMain(m *testing.M) { svrpdtest.Main(m) }
