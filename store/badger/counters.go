package badger

import (
	"errors"
	"time"

	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/internal/rules"
)

func (t *badgerTx) Counter(k string) (binding.Counter, error) {
	if err := t.Readable(); err != nil {
		return binding.Counter{}, err
	}
	var c binding.Counter
	err := t.get(key(pCounter, k), &c)
	if errors.Is(err, store.ErrNotFound) {
		return binding.Counter{}, nil
	}
	return c, err
}

func (t *badgerTx) Counters(keys ...string) ([]binding.Counter, error) {
	if err := t.Readable(); err != nil {
		return nil, err
	}
	return rules.Counters(t, keys)
}

func (t *badgerTx) CountEvent(k string, now time.Time, window time.Duration) (binding.Counter, error) {
	if err := t.Writable(); err != nil {
		return binding.Counter{}, err
	}
	return rules.CountEvent(t, k, now, window)
}

func (t *badgerTx) PutCounter(k string, c binding.Counter) error {
	if err := t.Writable(); err != nil {
		return err
	}
	return t.put(key(pCounter, k), c)
}

func (t *badgerTx) DeleteCounter(k string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	return t.del(key(pCounter, k))
}

func (t *badgerTx) EachCounter(fn func(key string, c binding.Counter) error) error {
	p := []byte(pCounter)
	return t.scan(p, false, func(rest, v []byte) error {
		var c binding.Counter
		if err := decode(p, v, &c); err != nil {
			return err
		}
		return fn(string(rest), c)
	})
}
