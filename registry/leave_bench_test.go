package registry_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/store"
)

// BenchmarkRevoke times one new revocation on Badger while the registry holds many bearer
// sessions of other operators: a revocation finds its operator's sessions through the
// store's operator index, so its cost must not grow with the session table.
func BenchmarkRevoke(b *testing.B) {
	for _, sessions := range []int{0, 10_000} {
		b.Run(fmt.Sprintf("sessions=%d", sessions), func(b *testing.B) {
			st, err := store.OpenBadger(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			svc, err := registry.New(registry.Config{Store: st, Clock: func() time.Time { return epoch }, RevokeAddressLimit: 1 << 30})
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < sessions; i += 1000 {
				err := st.Update(context.Background(), func(tx store.Tx) error {
					for j := i; j < i+1000 && j < sessions; j++ {
						s := authn.NewBearerSession(fmt.Sprintf("did:svrp:o:%08x", j), epoch)
						s.RevocationID = "rev"
						if err := tx.PutBearerSession(sha256.Sum256([]byte(fmt.Sprint(j))), s); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			root := testkit.TextKey("bench root")
			revs := make([]authn.SignedRevocation, b.N)
			for i := range revs {
				if revs[i], err = authn.SignRevocation(root, canonical.DefaultPrefix, "", "", fmt.Sprintf("rev-%d", i), epoch); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := range revs {
				if _, err := svc.Revoke(context.Background(), revs[i], "192.0.2.1"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
