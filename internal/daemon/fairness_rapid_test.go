package daemon

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/svrp/svrp/registry/netblock"
)

// TestFairnessProperties drives the bounds in flight with requests entering and leaving from
// addresses of a few networks, blocks and clients, and holds, after every step:
//   - the bounds: at most perClient per client group, perBlock per block, hard in all;
//   - a newcomer is let in without evicting while the totals and its bounds allow it;
//   - an eviction takes from the group holding the most where the newcomer's and the
//     victim's part, and only if it holds at least two more than the newcomer's there, so no
//     group is squeezed below the newcomer's share: what a stranger with many addresses can
//     do to an honest group is bring it down to the stranger's own share, no further;
//   - what the fairness counts is what is in flight.
func TestFairnessProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		perClient := rapid.IntRange(1, 4).Draw(t, "perClient")
		perBlock := rapid.IntRange(perClient, 3*perClient).Draw(t, "perBlock")
		maxConns := rapid.IntRange(1, 6).Draw(t, "maxConns")
		f := newFairness(perClient, perBlock, maxConns, 1)
		addr := rapid.Custom(func(t *rapid.T) string {
			return fmt.Sprintf("10.%d.%d.%d", rapid.IntRange(0, 3).Draw(t, "net"), rapid.IntRange(0, 2).Draw(t, "block"), rapid.IntRange(1, 3).Draw(t, "client"))
		})
		type live struct {
			fl      *flight
			groups  [netblock.Levels]string
			evicted *bool
		}
		var in []live
		held := func(lv netblock.Level, name string) int {
			n := 0
			for _, l := range in {
				if l.groups[lv] == name {
					n++
				}
			}
			return n
		}
		for step := range rapid.IntRange(1, 200).Draw(t, "steps") {
			if len(in) > 0 && rapid.Bool().Draw(t, "leave") {
				i := rapid.IntRange(0, len(in)-1).Draw(t, "which")
				f.leave(in[i].fl)
				in = append(in[:i], in[i+1:]...)
			} else {
				c := fairConn(addr.Draw(t, "addr"))
				groups := netblock.Groups(c.group)
				before := map[netblock.Level]map[string]int{}
				for _, lv := range netblock.All {
					before[lv] = map[string]int{}
					for _, l := range in {
						before[lv][l.groups[lv]]++
					}
				}
				all, client, block := len(in), held(netblock.Client, groups[netblock.Client]), held(netblock.Block, groups[netblock.Block])
				evicted := new(bool)
				fl := f.enter(c, func(error) { *evicted = true })
				var victim *live
				for i := range in {
					if *in[i].evicted {
						victim = &in[i]
					}
				}
				withinBounds := client < perClient && block < perBlock
				switch {
				case fl == nil && withinBounds && (all < f.total || all < f.hard && client == 0):
					t.Fatalf("step %d: %s refused with %d in flight (total %d, hard %d), %d of its own", step, c.group, all, f.total, f.hard, client)
				case fl != nil && !withinBounds:
					t.Fatalf("step %d: %s let in past its bounds: %d of its client's, %d of its block's", step, c.group, client, block)
				case fl != nil && victim == nil && (all >= f.hard || all >= f.total && client > 0):
					t.Fatalf("step %d: %s let in at %d in flight without making room", step, c.group, all)
				case victim != nil && (all < f.total || all < f.hard && client == 0):
					t.Fatalf("step %d: %s evicted a request with room to spare", step, c.group)
				}
				if victim != nil {
					lv := netblock.Network
					for lv > netblock.Client && victim.groups[lv] == groups[lv] {
						lv--
					}
					most := 0 // of the groups at lv within the newcomer's group above lv
					for _, l := range in {
						if lv == netblock.Network || l.groups[lv+1] == groups[lv+1] {
							most = max(most, before[lv][l.groups[lv]])
						}
					}
					if v, own := before[lv][victim.groups[lv]], before[lv][groups[lv]]; v < own+2 || v < most {
						t.Fatalf("step %d: %s evicted from %s, holding %d where they part, its own %d, the most %d", step, c.group, victim.groups[lv], v, own, most)
					}
					for i := range in {
						if in[i].evicted == victim.evicted {
							in = append(in[:i], in[i+1:]...)
							break
						}
					}
				}
				if fl != nil {
					in = append(in, live{fl: fl, groups: groups, evicted: evicted})
				}
			}
			f.mu.Lock()
			counted := f.all
			f.mu.Unlock()
			if counted != len(in) {
				t.Fatalf("step %d: the fairness counts %d in flight; %d are", step, counted, len(in))
			}
		}
	})
}
