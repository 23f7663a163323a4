package badger

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// LevelTrace is the level of Badger's informational and debug messages: below debug, so
// that svrpd's --log-level debug shows requests without Badger's compactions.
const LevelTrace = slog.LevelDebug - 4

// Badger's errors and warnings pass at badgerBurst lines at once and then one per
// badgerEvery: a flush that fails and retries every second writes four lines a minute, not
// sixty, and the lines it could not write are counted on the next.
const (
	badgerBurst = 5
	badgerEvery = 15 * time.Second
)

type slogBadger struct {
	l *slog.Logger

	mu         sync.Mutex
	tokens     float64
	last       time.Time
	suppressed int
}

func newSlogBadger(l *slog.Logger) *slogBadger {
	return &slogBadger{l: l, tokens: badgerBurst, last: time.Now()}
}

// admit takes a token for one line, or counts the line as suppressed. It returns how many
// lines were suppressed since the last one admitted.
func (s *slogBadger) admit(now time.Time) (ok bool, suppressed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens = min(badgerBurst, s.tokens+now.Sub(s.last).Seconds()/badgerEvery.Seconds())
	s.last = now
	if s.tokens < 1 {
		s.suppressed++
		return false, 0
	}
	s.tokens--
	n := s.suppressed
	s.suppressed = 0
	return true, n
}

func (s *slogBadger) log(level slog.Level, format string, args []any) {
	ctx := context.Background()
	if !s.l.Enabled(ctx, level) {
		return
	}
	msg := strings.TrimSpace(fmt.Sprintf(format, args...))
	if level < slog.LevelWarn {
		s.l.Log(ctx, level, msg)
		return
	}
	ok, n := s.admit(time.Now())
	switch {
	case !ok:
	case n > 0:
		s.l.Log(ctx, level, msg, "suppressed", n)
	default:
		s.l.Log(ctx, level, msg)
	}
}

func (s *slogBadger) Errorf(f string, a ...any)   { s.log(slog.LevelError, f, a) }
func (s *slogBadger) Warningf(f string, a ...any) { s.log(slog.LevelWarn, f, a) }
func (s *slogBadger) Infof(f string, a ...any)    { s.log(LevelTrace, f, a) }
func (s *slogBadger) Debugf(f string, a ...any)   { s.log(LevelTrace, f, a) }
