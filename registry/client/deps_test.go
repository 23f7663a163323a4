package client_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// TestClientImportsNoServer holds the client light: a program that only talks to a registry
// must not link the server, a store or Badger (and what Badger brings: ristretto, otel,
// protobuf).
func TestClientImportsNoServer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-json=ImportPath,Deps", "github.com/svrp/svrp/registry/client").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkg struct {
		ImportPath string
		Deps       []string
	}
	if err := json.Unmarshal(out, &pkg); err != nil {
		t.Fatalf("go list output: %v", err)
	}
	if len(pkg.Deps) == 0 {
		t.Fatal("go list reported no dependencies at all")
	}
	forbidden := []string{
		"github.com/svrp/svrp/registry",
		"github.com/svrp/svrp/store",
		"github.com/dgraph-io",
		"go.opentelemetry.io",
		"google.golang.org/protobuf",
		"github.com/prometheus",
		"github.com/julienschmidt/httprouter",
	}
	for _, dep := range pkg.Deps {
		if dep == "github.com/svrp/svrp/registry/api" {
			continue
		}
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("registry/client depends on %s", dep)
			}
		}
	}
}
