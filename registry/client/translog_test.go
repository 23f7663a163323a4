package client_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/svrp/svrp/registry/client"
	"github.com/svrp/svrp/translog"
)

func TestLogVerifier(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	c := w.client()
	key, err := c.LogKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v, err := client.NewLogVerifier(c, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	var first []byte
	for i := range 300 {
		n := w.node(c, fmt.Sprint("n", i))
		res, err := n.Register(ctx, fmt.Sprintf("203.0.113.%d:7000", i%250), nil, "")
		if err != nil {
			t.Fatal(err)
		}
		if i%97 != 0 {
			continue
		}
		// The node checks its own registration is in the log, under its DID and key.
		e, err := v.Entry(ctx, *res.LogIndex)
		if err != nil {
			t.Fatalf("registration %d: %v", i, err)
		}
		if k, _ := e.Field("key"); e.Kind != translog.KindNode || e.DID != n.DID || k != n.PublicKey().Base58() {
			t.Fatalf("entry %d is %+v, not the registration of %s", *res.LogIndex, e, n.DID)
		}
		if first == nil {
			first = v.Remembered()
		}
	}
	cp, err := v.Latest(ctx)
	if err != nil || cp.Size != 300 {
		t.Fatalf("Latest = %+v, %v", cp, err)
	}
	if es, err := v.Entries(ctx, cp, 250, 300); err != nil || len(es) != 50 {
		t.Fatalf("Entries = %d, %v", len(es), err)
	}

	// A registry that serves the first checkpoint again has rolled back: a verifier that
	// remembered a later one refuses it, and one that starts from it accepts the later.
	w.reqs.on("/log/checkpoint", func(_ int, rw http.ResponseWriter, _ *http.Request) bool {
		rw.Write(first)
		return true
	})
	if _, err := v.Latest(ctx); !errors.Is(err, translog.ErrBadCheckpoint) {
		t.Fatalf("a rolled-back checkpoint: %v", err)
	}
	w.reqs.on("/log/checkpoint", nil)
	fresh, err := client.NewLogVerifier(c, key, first)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.Latest(ctx); err != nil {
		t.Fatalf("a checkpoint that extends the remembered one: %v", err)
	}

	// A fork: the same size signed with another root, by the registry's own key.
	k, err := w.svc.LogKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	forked, _ := k.SignCheckpoint(translog.Checkpoint{Origin: k.Name(), Size: cp.Size, Hash: tlog.RecordHash([]byte("another log"))})
	if _, err := v.Accept(ctx, forked); !errors.Is(err, translog.ErrBadCheckpoint) {
		t.Fatalf("a forked checkpoint: %v", err)
	}
	grown, _ := k.SignCheckpoint(translog.Checkpoint{Origin: k.Name(), Size: cp.Size + 1, Hash: tlog.RecordHash([]byte("another log"))})
	if _, err := v.Accept(ctx, grown); !errors.Is(err, translog.ErrBadCheckpoint) {
		t.Fatalf("a larger checkpoint of another log: %v", err)
	}
	// A checkpoint under another key.
	if _, err := client.NewLogVerifier(c, strings.Replace(key, "+A", "+B", 1), first); err == nil {
		t.Error("a checkpoint verified under another key")
	}

	// A tile changed in transit does not prove an entry.
	w.reqs.on("/log/tile/entries/000", func(_ int, rw http.ResponseWriter, r *http.Request) bool {
		rw.Write([]byte{0, 1, 'x'})
		return true
	})
	if _, err := v.Entries(ctx, cp, 0, 1); err == nil {
		t.Error("an entry bundle changed in transit proved its entry")
	}
}
