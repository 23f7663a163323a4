package badger

import (
	"log/slog"

	"github.com/svrp/svrp/store"
)

// Badger's compactors are goroutines that each wake on a short timer to look for work,
// whether or not anything was written, so an idle daemon keeps paying for them. The store
// opens Badger with none and compacts when writes give it reason to, from one goroutine
// that sleeps until a commit wakes it. An idle store therefore does no compaction work at
// all, and a written one compacts as Badger's own level-0 compactor would: when level 0
// holds more tables than badgerL0Tables. Level 0 stalls writes only at
// badgerL0TablesStall tables, and every commit wakes the compactor first, so it runs long
// before a stall and a stalled write cannot wait on a compactor that is asleep.
//
// Both counts are the ones Badger itself defaults to. They are set on open from here, so
// that the options Badger runs with and the threshold the compactor checks stay one value
// even if a later Badger changes its defaults.
const (
	badgerL0Tables      = 5  // Badger's default NumLevelZeroTables
	badgerL0TablesStall = 15 // Badger's default NumLevelZeroTablesStall
)

// wakeCompactor tells the compactor that a write is coming; it never blocks.
func (b *badgerStore) wakeCompactor() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// compactLoop compacts whenever woken and level 0 needs it, until stop is closed.
func (b *badgerStore) compactLoop(log *slog.Logger) {
	defer close(b.compacted)
	for {
		select {
		case <-b.stopCompact:
			return
		case <-b.wake:
		}
		// Not on a faulted disk: compaction writes the tree anew, and a volume below the
		// reserve may not hold it. Writes are refused meanwhile, so level 0 cannot grow.
		for b.guard.cur.Load().state == store.HealthOK && b.needsCompaction() {
			// Flatten compacts level by level until one level holds everything; with one
			// worker it is what a single compactor does, run on demand.
			if err := b.db.Flatten(1); err != nil {
				if log != nil {
					log.Warn("badger compaction failed", "err", err)
				}
				break
			}
			select {
			case <-b.stopCompact:
				return
			default:
			}
		}
	}
}

func (b *badgerStore) needsCompaction() bool {
	for _, l := range b.db.Levels() {
		if l.Level == 0 && l.NumTables > badgerL0Tables {
			return true
		}
	}
	return false
}
