// Package storekit gives a test every store it can run on: the memory store, Badger in a
// temporary directory, and PostgreSQL in a schema of its own when SVRPD_TEST_POSTGRES names a
// server (package pgtest). It is imported by tests only.
package storekit

import (
	"context"
	"os"
	"testing"

	"github.com/svrp/svrp/internal/pgtest"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/badger"
	"github.com/svrp/svrp/store/postgres"
)

// All returns, by name, a function that opens a fresh store of each kind for t and closes it
// when t ends.
func All() map[string]func(t *testing.T) store.Store {
	m := map[string]func(t *testing.T) store.Store{
		"memory": func(*testing.T) store.Store { return store.NewMemory() },
		"badger": func(t *testing.T) store.Store {
			s, err := badger.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
	if os.Getenv(pgtest.Env) != "" {
		m["postgres"] = func(t *testing.T) store.Store {
			s, err := postgres.Open(context.Background(), pgtest.Schema(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
	}
	return m
}
