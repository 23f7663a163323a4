package client_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// TestClientImportsNoServer holds the client side light: a program that only talks to a
// registry (this package, and svrpd's client commands) must not link the server, a store,
// Badger or pgx (and what Badger brings: ristretto, otel, protobuf).
func TestClientImportsNoServer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	forbidden := []string{
		"github.com/svrp/svrp/registry",
		"github.com/svrp/svrp/store",
		"github.com/dgraph-io",
		"github.com/jackc",
		"go.opentelemetry.io",
		"google.golang.org/protobuf",
		"github.com/prometheus",
		"github.com/julienschmidt/httprouter",
	}
	allowed := map[string]bool{"github.com/svrp/svrp/registry/api": true, "github.com/svrp/svrp/registry/client": true}
	for _, path := range []string{"github.com/svrp/svrp/registry/client", "github.com/svrp/svrp/internal/cli"} {
		out, err := exec.Command("go", "list", "-json=ImportPath,Deps", path).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", path, err)
		}
		var pkg struct {
			ImportPath string
			Deps       []string
		}
		if err := json.Unmarshal(out, &pkg); err != nil {
			t.Fatalf("go list %s output: %v", path, err)
		}
		if len(pkg.Deps) == 0 {
			t.Fatalf("go list reported no dependencies at all for %s", path)
		}
		for _, dep := range pkg.Deps {
			if allowed[dep] {
				continue
			}
			for _, f := range forbidden {
				if dep == f || strings.HasPrefix(dep, f+"/") {
					t.Errorf("%s depends on %s", path, dep)
				}
			}
		}
	}
}
