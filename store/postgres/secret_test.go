package postgres

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// TestSecretSharedByStoresOpenedAtOnce opens several stores at once on a fresh schema, as
// daemons started together on an empty database do, and has them all ask for the same
// secrets at the same moment: every one must get the secret one of them created, none an
// error. Many names make many races, so that a single statement that inserts and reads on
// one snapshot, which misses a concurrent insert, fails here.
func TestSecretSharedByStoresOpenedAtOnce(t *testing.T) {
	u := freshSchema(t)
	const daemons, names = 8, 20
	stores := make([]*Store, daemons)
	errs := make([]error, daemons)
	var wg sync.WaitGroup
	for i := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = Open(context.Background(), u)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("store %d: %v", i, err)
		}
		defer stores[i].Close()
	}

	for n := range names {
		name := fmt.Sprintf("key-%d", n)
		got := make([][32]byte, daemons)
		start := make(chan struct{})
		for i, p := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				got[i], errs[i] = p.Secret(context.Background(), name)
			}()
		}
		close(start)
		wg.Wait()
		for i := range stores {
			if errs[i] != nil {
				t.Fatalf("%s: store %d: %v", name, i, errs[i])
			}
			if got[i] != got[0] || got[i] == ([32]byte{}) {
				t.Fatalf("%s: store %d got %x, store 0 %x; want one non-zero secret", name, i, got[i], got[0])
			}
		}
	}
}
