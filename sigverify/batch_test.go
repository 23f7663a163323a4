package sigverify

import (
	"crypto/ed25519"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
)

type signed struct {
	priv ed25519.PrivateKey
	pub  ed25519.PublicKey
}

func keys(n int) []signed {
	out := make([]signed, n)
	for i := range out {
		seed := make([]byte, ed25519.SeedSize)
		binary.LittleEndian.PutUint64(seed, uint64(i)+1)
		priv := ed25519.NewKeyFromSeed(seed)
		out[i] = signed{priv, priv.Public().(ed25519.PublicKey)}
	}
	return out
}

// entries returns n honest entries, then spoils those bad names.
func entries(n int, bad ...int) []Entry {
	ks := keys(n)
	out := make([]Entry, n)
	for i, k := range ks {
		msg := fmt.Appendf(nil, "heartbeat %d", i)
		out[i] = Entry{Key: k.pub, Msg: msg, Sig: ed25519.Sign(k.priv, msg)}
	}
	for _, i := range bad {
		out[i].Sig = flip(out[i].Sig, 8*32+3) // a changed S: R still decodes

	}
	return out
}

func TestVerifyBatchAnswersAsVerify(t *testing.T) {
	for _, c := range []struct {
		n   int
		bad []int
	}{
		{1, nil}, {1, []int{0}}, {2, []int{1}}, {7, []int{0, 6}}, {16, nil},
		{16, []int{3}}, {16, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
		{33, []int{5, 17, 32}},
	} {
		es := entries(c.n, c.bad...)
		// One entry the rule refuses on its bytes: a small-order key.
		es = append(es, Entry{Key: smallOrder[2][:], Msg: es[0].Msg, Sig: es[0].Sig})
		ok := make([]bool, len(es))
		VerifyBatch(es, ok)
		for i, e := range es {
			if want := Verify(e.Key, e.Msg, e.Sig); ok[i] != want {
				t.Errorf("n=%d bad=%v: entry %d batch says %v, Verify says %v", c.n, c.bad, i, ok[i], want)
			}
		}
	}
}

func TestBatcherAnswersEveryCallerAsVerify(t *testing.T) {
	b := NewBatcher()
	defer b.Close()
	es := entries(200, 1, 50, 51, 199)
	var wg sync.WaitGroup
	errs := make(chan string, len(es))
	for round := range 3 {
		for i, e := range es {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if got, want := b.Verify(e.Key, e.Msg, e.Sig), Verify(e.Key, e.Msg, e.Sig); got != want {
					errs <- fmt.Sprintf("round %d entry %d: Batcher %v, Verify %v", round, i, got, want)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestBatcherAfterCloseStillAnswers(t *testing.T) {
	b := NewBatcher()
	b.Close()
	b.Close()
	es := entries(2, 1)
	if !b.Verify(es[0].Key, es[0].Msg, es[0].Sig) || b.Verify(es[1].Key, es[1].Msg, es[1].Sig) {
		t.Fatal("a closed Batcher answered differently from Verify")
	}
}
